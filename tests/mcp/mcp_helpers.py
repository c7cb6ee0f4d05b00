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
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "realtime"))

from realtime_helpers import Daemon, daemon_env, start_daemon  # noqa: E402

THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")
WAIT = 20.0  # upper bound for anything awaited in a test (never a sleep)

__all__ = ["Daemon", "McpServer", "THRUM", "WAIT", "daemon_env", "mcp_server", "run_thrum", "start_daemon"]


class McpServer:
    """One running `thrum mcp serve` and its client session."""

    def __init__(self, session: ClientSession, stray: list, agent: str | None):
        self.session = session
        self.stray = stray
        self.agent = agent

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


def server_env(**extra: str) -> dict:
    env = {"THRUM_NO_AUTOSTART": "0", "THRUM_LOG_LEVEL": os.environ.get("MCP_TEST_LOG", "WARNING")}
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
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=handler) as session:
            with trio.fail_after(WAIT):
                await session.initialize()
            yield McpServer(session, stray, agent)
    assert not stray, f"the server wrote something other than JSON-RPC on stdout: {stray!r}"


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
