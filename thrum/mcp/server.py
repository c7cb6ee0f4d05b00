"""``thrum mcp serve``: the MCP server over stdio (official SDK, `MCPServer`).

Start-up (spec/mcp-server.md "Startup Sequence"; the CLI did steps 1–4 before
calling `serve`): repository, identity, daemon health (started when needed),
then here: the daemon link (registration, heartbeat, subscription for
wake-ups), the 13 tools, and stdio until the host closes stdin or a signal
arrives.

Nothing but protocol reaches stdout: the SDK points fd 1 at stderr while it
serves, and every log line goes to stderr (level from ``THRUM_LOG_LEVEL``,
default WARNING; ``--verbose``: DEBUG).
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.tools.base import Tool
from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError

from .. import __version__
from ..identity import now_rfc3339
from .link import DaemonLink
from .tools import build_tools
from .waiter import Waiter

if TYPE_CHECKING:
    from ..identity import Identity
    from ..paths import ThrumPaths

Context = ServerRequestContext[Any, Any]

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
thrum is a message bus for a team of agents working in one git repository. You are
one agent; your name, role and groups are your addresses (@name, @role, @group,
@everyone).

To send: send_message(to="@reviewer", content="..."), broadcast_message(content=...).
To read: check_messages() returns your unread messages and marks them read.
To be woken when a message arrives without polling, run a background listener that
calls check_messages() once, then wait_for_message(timeout=300) in a loop, and hands
each message to the main agent (critical: stop and handle now; high: at the next
breakpoint; normal: after the current sub-task; low: when convenient).
"""


class ArgumentErrors:
    """Middleware: a tools/call whose arguments fail the input schema gets one line
    naming the argument and the rule, instead of pydantic's multi-line report."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {t.name: t for t in tools}

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            name = ctx.params.get("name")
            tool = self.tools.get(name) if isinstance(name, str) else None
            arguments = ctx.params.get("arguments") or {}
            if tool is not None and isinstance(arguments, dict):
                try:
                    tool.fn_metadata.validate_arguments(arguments)
                except ValidationError as exc:
                    return CallToolResult(
                        content=[TextContent(type="text", text=argument_error(tool.name, exc))], is_error=True
                    )
        return await call_next(ctx)


class LateCancels:
    """Middleware: a client's ``notifications/cancelled`` also reaches the waiter. The SDK
    cancels a request that is still running; a cancel for a wait_for_message that was
    already answered (the cancel crossed the answer, and the client drops it) makes the
    waiter give that wait's message back (thrum.mcp.waiter, rule 5)."""

    def __init__(self, waiter: Waiter) -> None:
        self.waiter = waiter

    async def __call__(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "notifications/cancelled" and isinstance(ctx.params, dict):
            request_id = ctx.params.get("requestId")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                await self.waiter.cancelled(str(request_id))
        return result


def argument_error(tool: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err.get("loc") or ()) or "arguments"
        if err.get("type") == "missing":
            parts.append(f"missing required argument {loc}")
            continue
        msg = str(err.get("msg") or "is invalid")
        value = err.get("input")
        shown = f" (got {value!r:.60})" if not isinstance(value, dict) else ""
        parts.append(f"invalid {loc}: {msg[0].lower() + msg[1:]}{shown}")
    return f"Error executing tool {tool}: " + "; ".join(parts)


def build_server(link: DaemonLink, waiter: Waiter) -> MCPServer:
    tools = build_tools(link, waiter)
    return MCPServer(
        "thrum",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=tools,
        log_level=_level_name(),
        middleware=[ArgumentErrors(tools), LateCancels(waiter)],
    )


LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LEVELS: dict[str, LogLevel] = {name: name for name in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")}


def _level_name() -> LogLevel:
    return LEVELS.get(os.environ.get("THRUM_LOG_LEVEL", "").strip().upper(), "WARNING")


def setup_logging(verbose: bool) -> None:
    level = "DEBUG" if verbose else _level_name()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("thrum mcp: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    os.environ["THRUM_LOG_LEVEL"] = level  # MCPServer configures its own logging from the same level


async def serve(paths: ThrumPaths, ident: Identity) -> None:
    """Serve MCP on stdio as ``ident`` until stdin closes or SIGTERM/SIGINT."""
    link = DaemonLink(paths, ident)
    waiter = Waiter(link, started_at=now_rfc3339())
    server = build_server(link, waiter)
    async with anyio.create_task_group() as tg:
        await tg.start(link.run)
        tg.start_soon(_stop_on_signal, tg.cancel_scope, waiter)
        await server.run_stdio_async()
        tg.cancel_scope.cancel()


async def _stop_on_signal(scope: anyio.CancelScope, waiter: Waiter) -> None:
    """SIGTERM/SIGINT/SIGHUP: end the tool calls, then exit.

    The SDK reads stdin in a worker thread that no cancellation can interrupt, so
    after a running wait has put its message back (its clean-up is shielded) the
    process leaves with `os._exit`; everything it holds lives in the daemon.
    """
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("signal %d: stopping", signum)
            break
    scope.cancel()
    with anyio.CancelScope(shield=True):
        with anyio.move_on_after(5):
            await waiter.wait_idle()
    sys.stderr.flush()
    os._exit(0)


def run(paths: ThrumPaths, ident: Identity, *, verbose: bool = False) -> None:
    setup_logging(verbose)
    anyio.run(serve, paths, ident, backend="trio")
