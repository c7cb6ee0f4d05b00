"""Running ``thrum hook HOST EVENT`` as a host runs it: JSON on stdin, stdout read, exit status checked."""

from __future__ import annotations

import json
import subprocess

from e2e_helpers import THRUM, Repo, base_env


def run_hook(
    repo: Repo,
    host: str,
    event: str,
    payload: dict | str | None = None,
    *,
    agent: str | None = "bob",
    env=None,
    cwd=None,
    argv=(),
):
    """(exit status, stdout, stderr) of one hook run; ``payload`` defaults to the host's usual fields."""
    if payload is None:
        payload = {"session_id": "s1", "cwd": str(repo.path), "hook_event_name": event}
    data = payload if isinstance(payload, str) else json.dumps(payload)
    args = [THRUM, "hook", host, event, *argv] + (["--agent", agent] if agent else [])
    proc = subprocess.run(
        args,
        input=data,
        capture_output=True,
        text=True,
        env=base_env(**(env or {})),
        cwd=str(cwd or repo.path),
        timeout=30,
    )
    return proc.returncode, proc.stdout, proc.stderr


def context_of(out: str) -> str:
    """The additionalContext a Claude Code / Codex / Gemini hook printed ('' for nothing)."""
    if not out.strip():
        return ""
    return json.loads(out)["hookSpecificOutput"]["additionalContext"]


def hooks_log(repo: Repo) -> str:
    path = repo.path / ".thrum" / "var" / "hooks.log"
    return path.read_text() if path.exists() else ""
