"""`thrum mcp config`: what to paste into an MCP host so it starts `thrum mcp serve`.

Pure functions over (thrum executable, repository, agent): absolute paths, so the
host can start the server from any directory. Hosts that read JSON get the
spec's ``mcpServers`` object; hosts with an ``mcp add`` command get that line.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

HOSTS = ("json", "claude", "cursor", "codex")
SERVER_NAME = "thrum"

# Where each host keeps it. The configuration names this machine's paths (the installed
# thrum, this checkout), so it belongs in the host's per-user or per-machine settings,
# never in a file the repository shares with other machines (.mcp.json, Claude Code's
# `--scope project`, a committed .cursor/mcp.json): there it would point at paths
# that exist only here.
WHERE = {
    "json": (
        "add this to your MCP host's settings for this machine; it names this machine's paths, "
        "so keep it out of files the repository shares (such as .mcp.json)"
    ),
    "claude": (
        "run this once in a shell: Claude Code keeps it for this project on this machine "
        "(it names this machine's paths: run it again on each machine rather than sharing it)"
    ),
    "cursor": (
        "put this in ~/.cursor/mcp.json (it names this machine's paths, so not in a .cursor/mcp.json you commit)"
    ),
    "codex": "run this once in a shell (Codex stores it in ~/.codex/config.toml)",
}


def thrum_executable() -> str:
    """Absolute path of the installed ``thrum`` command (the one of this Python environment)."""
    beside = Path(sys.executable).parent / "thrum"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    found = shutil.which("thrum")
    if found:
        return str(Path(found).absolute())
    argv0 = Path(sys.argv[0])
    if argv0.name == "thrum" and argv0.exists():
        return str(argv0.absolute())
    return "thrum"


def serve_args(repo: Path, agent: str) -> list[str]:
    return ["mcp", "serve", "--repo", str(repo), "--agent-id", agent]


def render(host: str, *, executable: str, repo: Path, agent: str) -> str:
    """The configuration text for ``host`` (one of `HOSTS`)."""
    args = serve_args(repo, agent)
    if host == "json":
        server = {"type": "stdio", "command": executable, "args": args}
        return json.dumps({"mcpServers": {SERVER_NAME: server}}, indent=2)
    if host == "cursor":
        return json.dumps({"mcpServers": {SERVER_NAME: {"command": executable, "args": args}}}, indent=2)
    if host in ("claude", "codex"):
        return shlex.join([host, "mcp", "add", SERVER_NAME, "--", executable, *args])
    raise ValueError(f"unknown host {host!r} (known: {', '.join(HOSTS)})")
