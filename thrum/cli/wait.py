"""``thrum wait``: block until a message for me exists (message.wait), print it, exit 0;
exit 1 with one line on stderr when the timeout passes first.

The daemon wakes the call the moment a matching message is written (locally or
by a sync); nothing polls. Waits longer than the daemon's per-call limit are
renewed until the deadline.
"""

from __future__ import annotations

import shutil
import time
from typing import Any, Callable, TypeVar

import click

from ..errors import Timeout, Unavailable
from .common import CONTEXT_SETTINGS, Runtime, global_options, parse_tag, runtime
from .render.messages import DEFAULT_WIDTH, render_inbox

T = TypeVar("T")

MAX_CALL = 600.0  # the daemon's longest single message.wait
SLACK = 15.0  # extra socket time beyond the wait itself


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--timeout",
    type=click.FloatRange(0, None),
    default=300.0,
    show_default=True,
    metavar="SECONDS",
    help="Give up after this long (exit 1). 0 checks once without waiting.",
)
@click.option("--mentions", is_flag=True, help="Only messages that mention me (my name, role or groups).")
@click.option("--scope", metavar="TYPE:VALUE", help="Only messages with this scope, e.g. module:auth.")
@click.option(
    "--limit", type=click.IntRange(1, 100), default=10, show_default=True, help="Most messages to print at once."
)
@click.option("--peek", is_flag=True, help="Do not mark the printed messages as read.")
@click.option(
    "--acked",
    "acked",
    metavar="MSG_ID",
    help="Instead: wait until every recipient of your message MSG_ID has acknowledged it.",
)
@click.option("--any", "any_", is_flag=True, help="With --acked: one recipient's ack is enough.")
@global_options()
def wait(
    timeout: float, mentions: bool, scope: str | None, limit: int, peek: bool, acked: str | None, any_: bool
) -> None:
    """Wait for an unread message (not my own) and print it.

    Returns at once when unread messages already exist. Printed messages are
    marked read (unless --peek), so the next `thrum wait` waits for new ones.

    \b
    Exit codes: 0 message(s) printed, 1 timed out (or error), 2 usage error.

    \b
    Examples:
      thrum wait --timeout 120
      thrum wait --mentions
      thrum wait --scope module:auth --json
      thrum wait --acked msg_01M8AKM2 --timeout 600
    """
    rt = runtime()
    if acked:
        _wait_acked(rt, acked, timeout, any_)
        return
    if any_:
        raise click.UsageError("--any goes with --acked MSG_ID")
    params: dict[str, Any] = {"limit": limit}
    if mentions:
        params["mentions"] = True
    if scope:
        params["scope"] = parse_tag("--scope", scope)
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.0, deadline - time.monotonic())
        chunk = min(left, MAX_CALL)
        result = _through_restarts(
            rt,
            deadline,
            lambda chunk=chunk: rt.agent_call(  # type: ignore[misc]  # the default binds this turn's chunk
                "message.wait", {**params, "timeout": chunk}, timeout=chunk + SLACK
            ),
        )
        messages = (result or {}).get("messages") or []
        if messages or deadline - time.monotonic() <= RETRY_S:
            break
    if not messages:  # with --json: one error object (code -32007) on stdout, like every error
        raise Timeout(f"no message within {timeout:g}s", data={"timed_out": True})
    width = shutil.get_terminal_size((DEFAULT_WIDTH + 2, 24)).columns - 2
    shown = {
        "messages": messages,
        "total": len(messages),
        "unread": len(messages),
        "page": 1,
        "page_size": len(messages),
    }
    rt.emit(result, lambda: render_inbox(shown, width=width))
    if not peek:
        ids = [m["message_id"] for m in messages if isinstance(m, dict) and m.get("message_id")]
        if ids:
            rt.best_effort("message.markRead", {"message_ids": ids})


RETRY_S = 0.2  # between attempts to reach a daemon that is restarting


def _through_restarts(rt: Runtime, deadline: float, call: Callable[[], T]) -> T | None:
    """``call()``, again while the daemon is away (stopping, restarting: it answers an early
    empty wait, or refuses the connection) until ``deadline``; None when it never came back.
    The MCP waiter does the same (issue 30, item 8)."""
    while True:
        try:
            return call()
        except Unavailable as exc:
            if deadline - time.monotonic() <= RETRY_S:
                rt.debug(f"the daemon did not come back before the deadline: {exc.message}")
                return None
            rt.debug(f"daemon away ({exc.message}); trying again")
            time.sleep(RETRY_S)


def _wait_acked(rt: Runtime, message_id: str, timeout: float, any_: bool) -> None:
    """``thrum wait --acked``: message.waitAcked until acked (exit 0) or the timeout (exit 1)."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(0.0, deadline - time.monotonic())
        chunk = min(left, MAX_CALL)
        result = _through_restarts(
            rt,
            deadline,
            lambda chunk=chunk: rt.call(  # type: ignore[misc]  # the default binds this turn's chunk
                "message.waitAcked", {"message_id": message_id, "timeout": chunk, "any": any_}, timeout=chunk + SLACK
            ),
        ) or {"timed_out": True, "waiting_for": []}
        if not result.get("timed_out") or deadline - time.monotonic() <= RETRY_S:
            break
    waiting = [str(a) for a in result.get("waiting_for") or []]
    if result.get("timed_out"):
        raise Timeout(
            f"no ack within {timeout:g}s; still waiting for " + ", ".join(f"@{a}" for a in waiting),
            data={"timed_out": True, "waiting_for": waiting},
        )
    by = ", ".join(f"@{a}" for a in result.get("acked_by") or [])
    rt.emit(result, f"> {result.get('message_id')} acknowledged by {by}")
