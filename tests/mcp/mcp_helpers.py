"""Helpers for the MCP tests: `thrum mcp serve` as a subprocess, driven by the official
SDK client (`stdio_client` + `ClientSession`), against real daemons in temp repos.

The daemons come from the real-time tests' helpers (`realtime_helpers.start_daemon`):
local-only repositories with any free WebSocket port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path

import trio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "realtime"))

from realtime_helpers import Daemon, daemon_env, start_daemon  # noqa: E402

THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")
WAIT = 20.0  # upper bound for anything awaited in a test (never a sleep)

__all__ = [
    "Daemon",
    "McpServer",
    "SharedMcpServer",
    "THRUM",
    "Tap",
    "WAIT",
    "daemon_env",
    "mcp_server",
    "run_thrum",
    "serve_refused",
    "shared_mcp_server",
    "start_daemon",
    "tapped_mcp_server",
]


class McpServer:
    """One running `thrum mcp serve` and its client session."""

    def __init__(self, session: ClientSession, stray: list, agent: str | None, stderr: Path | None = None):
        self.session = session
        self.stray = stray
        self.agent = agent
        self.stderr = stderr

    def blocked_waits(self) -> int:
        """How many times a wait_for_message found nothing for it and began waiting (the
        server's debug line): a test that is about the wake-up sends once this grows."""
        assert self.stderr is not None, "a server with its stderr kept"
        return self.stderr.read_text(errors="replace").count("nothing queued for it; waiting")

    async def until_blocked(self, more_than: int) -> None:
        """Return once a wait has begun waiting since ``blocked_waits()`` was ``more_than``."""
        with trio.fail_after(WAIT):
            while self.blocked_waits() <= more_than:  # noqa: ASYNC110 - another process's progress
                await trio.sleep(0.02)

    async def call(self, tool: str, args: dict | None = None) -> dict:
        """The tool's structured result (fails the test on a tool error)."""
        with trio.fail_after(WAIT):
            result = await self.session.call_tool(tool, args or {})
        assert not result.is_error, f"{tool} failed: {result.content[0].text if result.content else result}"
        assert result.structured_content is not None, f"{tool} returned no structuredContent"
        return result.structured_content

    async def fail(self, tool: str, args: dict | None = None) -> str:
        """The one-line error text of a tool call that must fail."""
        with trio.fail_after(WAIT):
            result = await self.session.call_tool(tool, args or {})
        assert result.is_error, f"{tool} should have failed, got {result.structured_content}"
        text = result.content[0].text
        assert "\n" not in text, f"error is not one line: {text!r}"
        return text


def serve_refused(repo: Path, agent: str) -> str:
    """Start `thrum mcp serve` for ``agent`` where its start-up is refused (no THRUM_* from
    the test's environment): asserts it exits 1 with nothing on stdout and one line on
    stderr, and returns that line."""
    proc = subprocess.run(
        [THRUM, "mcp", "serve", "--repo", str(repo), "--agent-id", agent],
        input=b"",
        capture_output=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("THRUM_")},
    )
    assert proc.returncode == 1 and proc.stdout == b"", proc
    [line] = proc.stderr.decode().splitlines()
    return line


def server_env(**extra: str) -> dict:
    env = {"THRUM_NO_AUTOSTART": "0", "THRUM_LOG_LEVEL": os.environ.get("MCP_TEST_LOG", "DEBUG")}
    env.update(extra)
    return env


@asynccontextmanager
async def mcp_server(repo: Path, agent: str | None = None, *, env: dict | None = None):
    """Start `thrum mcp serve` for ``agent`` in ``repo``; fails the test if anything but
    JSON-RPC ever appears on the server's stdout."""
    stray: list = []

    async def handler(message) -> None:
        if isinstance(message, Exception):  # the SDK hands unparseable stdout lines over as exceptions
            stray.append(message)

    args = ["mcp", "serve", "--repo", str(repo)] + (["--agent-id", agent] if agent else [])
    params = StdioServerParameters(command=THRUM, args=args, env=server_env(**(env or {})), cwd=str(repo))
    # the server's log (debug: the waits' lines) goes to a file; printed, pytest shows it when the test fails
    with tempfile.TemporaryDirectory() as tmp:
        stderr = Path(tmp) / "stderr"
        with stderr.open("w") as errlog:
            try:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write, message_handler=handler) as session:
                        with trio.fail_after(WAIT):
                            await session.initialize()
                        yield McpServer(session, stray, agent, stderr)
            finally:
                print(f"--- thrum mcp serve ({agent}), stderr:\n{stderr.read_text(errors='replace')[-20000:]}")
    assert not stray, f"the server wrote something other than JSON-RPC on stdout: {stray!r}"


class _Across:
    """The async methods of an object that lives in another thread's event loop, awaited from
    this one (the call runs there, this task waits in a worker thread)."""

    def __init__(self, portal: BlockingPortal, target: object):
        self._portal, self._target = portal, target

    def __getattr__(self, name: str):
        method = getattr(self._target, name)

        async def across(*args, **kwargs):
            return await trio.to_thread.run_sync(self._portal.call, partial(method, *args, **kwargs))

        return across


class SharedMcpServer:
    """A `thrum mcp serve` for a whole test module (`shared_mcp_server`), used as an
    `McpServer`: ``await server.call(...)``, ``server.fail``, ``server.session.list_tools()``."""

    def __init__(self, portal: BlockingPortal, server: McpServer):
        self._across = _Across(portal, server)
        self.session = _Across(portal, server.session)
        self.agent = server.agent

    async def call(self, tool: str, args: dict | None = None) -> dict:
        return await self._across.call(tool, args)

    async def fail(self, tool: str, args: dict | None = None) -> str:
        return await self._across.fail(tool, args)


@contextmanager
def shared_mcp_server(repo: Path, agent: str):
    """One `mcp_server` for the tests of a module that need nothing of a fresh one: a server's
    start costs ~0.7 s of CPU (the MCP SDK's import). pytest-trio gives each test a trio run of
    its own, so the server's client session runs in a run of its own, in a thread, for the
    module, and each test's calls go to it through a portal (anyio's, on trio); still the
    official client, over the server's stdio."""
    with start_blocking_portal(backend="trio") as portal:
        with portal.wrap_async_context_manager(mcp_server(repo, agent)) as server:
            yield SharedMcpServer(portal, server)


class Tap:
    """What passes between the client session and a `thrum mcp serve` (see `tapped_mcp_server`):
    the requests the client wrote, and a way to hold back the server's answer to one of them."""

    def __init__(self):
        self.requests: list = []  # JSONRPCRequest, in the order written
        self._hold_id = None
        self.held = trio.Event()  # set when the answer to the held request arrived (and was kept back)
        self._release = trio.Event()

    def request_id(self, method: str, name: str | None = None):
        """The id of the last request for ``method`` (and tool ``name``) the client wrote."""
        for req in reversed(self.requests):
            if req.method == method and (name is None or (req.params or {}).get("name") == name):
                return req.id
        raise AssertionError(f"no {method} {name or ''} request was written")

    def hold_answer_to_next(self, method: str, name: str | None = None) -> None:
        """Keep back the server's answer to the next such request until `release`."""
        self._hold = (method, name)
        self._hold_id = None

    def release(self) -> None:
        self._release.set()

    def _outgoing(self, message) -> None:
        if isinstance(message, JSONRPCRequest):
            self.requests.append(message)
            hold = getattr(self, "_hold", None)
            if hold and message.method == hold[0] and (message.params or {}).get("name") == hold[1]:
                self._hold_id, self._hold = message.id, None

    async def _incoming(self, message) -> None:
        if isinstance(message, JSONRPCResponse | JSONRPCError) and self._hold_id is not None:
            if message.id == self._hold_id:
                self.held.set()
                await self._release.wait()


@asynccontextmanager
async def tapped_mcp_server(repo: Path, agent: str):
    """`mcp_server` with a `Tap` between the client session and the server's stdio:
    yields ``(server, tap)``. The relay forwards every message unchanged, in order."""
    tap = Tap()
    args = ["mcp", "serve", "--repo", str(repo), "--agent-id", agent]
    params = StdioServerParameters(command=THRUM, args=args, env=server_env(), cwd=str(repo))
    async with stdio_client(params) as (read, write):
        to_server, from_client = trio.open_memory_channel(100)
        to_client, from_server = trio.open_memory_channel(100)

        async def outgoing():
            async for item in from_client:
                tap._outgoing(item.message)
                await write.send(item)

        async def incoming():
            async for item in read:
                if not isinstance(item, Exception):
                    await tap._incoming(item.message)
                await to_client.send(item)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(outgoing)
            nursery.start_soon(incoming)
            async with ClientSession(from_server, to_server) as session:
                with trio.fail_after(WAIT):
                    await session.initialize()
                yield McpServer(session, [], agent), tap
            nursery.cancel_scope.cancel()


def run_thrum(
    repo: Path,
    *args: str,
    agent: str | None = None,
    env: dict | None = None,
    stdin: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess:
    """The installed CLI, with a clean THRUM_* environment."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    if agent:
        e["THRUM_NAME"] = agent
    e.update(env or {})
    return subprocess.run(
        [THRUM, *args], cwd=str(repo), env=e, input=stdin, capture_output=True, text=True, timeout=timeout
    )


def cli_send(repo: Path, agent: str, text: str, *args: str) -> str:
    """`thrum send` as ``agent``; the new message id."""
    import json

    proc = run_thrum(repo, "send", text, *args, "--json", agent=agent)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["message_id"]
