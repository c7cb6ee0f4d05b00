"""message.wait (long-poll) over both transports, and the `thrum wait` command.

Deadlines themselves are tested on trio's clock, without waiting: tests/daemon/test_daemon_clock.py.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from realtime_helpers import WAIT

_n = itertools.count()


def _pair(d, tag: str) -> tuple[str, str]:
    i = next(_n)
    sender, waiter = f"{tag}s{i}", f"{tag}w{i}"
    d.register(sender, "implementer")
    d.register(waiter, f"{tag}role{i}", identity_file=True)
    # the inbox holds every message by others: start from an empty one
    d.call("message.markRead", {"caller": waiter, "all": True})
    return sender, waiter


def test_message_wait_over_unix_returns_only_a_matching_message(shared):
    d = shared
    sender, waiter = _pair(d, "wu")
    scope = {"type": "wait", "value": waiter}
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            d.call, "message.wait", {"caller": waiter, "timeout": WAIT, "scope": scope}, timeout=WAIT + 5
        )
        d.send(sender, "not in scope", to=[waiter])
        match = d.send(sender, "in scope", to=[waiter], scopes=[scope])["message_id"]
        result = pending.result(WAIT + 5)
    assert result["timed_out"] is False
    assert [m["message_id"] for m in result["messages"]] == [match]


def test_message_wait_with_mentions_resolves_the_role(shared):
    d = shared
    sender, waiter = _pair(d, "wm")
    role = d.call("agent.get", {"name": waiter})["agent"]["role"]
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            d.call, "message.wait", {"caller": waiter, "timeout": WAIT, "mentions": True}, timeout=WAIT + 5
        )
        d.send(sender, "for nobody in particular")
        match = d.send(sender, "for the role", to=[role])["message_id"]
        result = pending.result(WAIT + 5)
    assert [m["message_id"] for m in result["messages"]] == [match]


def test_message_wait_after_skips_older_unread_messages(shared):
    d = shared
    sender, waiter = _pair(d, "wa")
    older = d.send(sender, "already here", to=[waiter])["message_id"]
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            d.call, "message.wait", {"caller": waiter, "timeout": WAIT, "after": older}, timeout=WAIT + 5
        )
        newer = d.send(sender, "new one", to=[waiter])["message_id"]
        result = pending.result(WAIT + 5)
    assert [m["message_id"] for m in result["messages"]] == [newer]


def test_message_wait_over_ws_does_not_block_other_requests(shared):
    d = shared
    sender, waiter = _pair(d, "ww")

    async def go():
        c = await d.ws()
        waiting = asyncio.ensure_future(c.call("message.wait", {"caller": waiter, "timeout": WAIT}, timeout=WAIT + 5))
        assert (await c.call("health"))["status"] == "ok"  # answered while the wait is pending
        assert (await c.call("subscribe.list"))["subscriptions"] == []
        assert not waiting.done()
        loop = asyncio.get_running_loop()
        sent = await loop.run_in_executor(None, lambda: d.send(sender, "wake up", to=[waiter]))
        result = await waiting
        await c.close()
        return sent, result

    sent, result = asyncio.run(go())
    assert result["timed_out"] is False  # woken by the message, not by the deadline
    assert [m["message_id"] for m in result["messages"]] == [sent["message_id"]]


def _thrum(d, *args: str, name: str) -> subprocess.Popen:
    env = {**os.environ, "THRUM_NAME": name, "THRUM_NO_AUTOSTART": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "thrum.cli.main", *args],
        cwd=d.repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_thrum_wait_wakes_on_a_message_then_times_out(shared):
    d = shared
    sender, waiter = _pair(d, "cw")
    proc = _thrum(d, "wait", "--timeout", str(WAIT), name=waiter)
    d.send(sender, "hello waiter", to=[waiter])
    out, err = proc.communicate(timeout=WAIT + 10)
    assert proc.returncode == 0, err
    assert "hello waiter" in out
    # printed messages were marked read: the next wait has nothing and times out
    proc = _thrum(d, "wait", "--timeout", "0.3", name=waiter)
    out, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 1
    assert out == ""
    assert err.strip().splitlines() == ["thrum: no message within 0.3s"]


def test_thrum_wait_json_and_scope(shared):
    d = shared
    sender, waiter = _pair(d, "cj")
    proc = _thrum(d, "wait", "--timeout", str(WAIT), "--scope", f"module:{waiter}", "--json", name=waiter)
    d.send(sender, "other", to=[waiter])
    msg = d.send(sender, "scoped", to=[waiter], scopes=[{"type": "module", "value": waiter}])["message_id"]
    out, err = proc.communicate(timeout=WAIT + 10)
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert [m["message_id"] for m in result["messages"]] == [msg]
    assert result["timed_out"] is False
