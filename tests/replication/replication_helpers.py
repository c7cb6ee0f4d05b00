"""Machines for the replication tests: clones of one bare remote, each with its own
daemon, driven through the installed `thrum` CLI (and raw RPC where speed matters)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from fixtures.thrum_cli import THRUM, run_thrum
from thrum import lifecycle
from thrum.paths import resolve

__all__ = ["THRUM", "Machine", "event_ids", "machine_env"]


class Machine:
    def __init__(self, path: Path, env: dict):
        self.path = Path(path)
        self.env = env
        self.paths = None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def worktree(self) -> Path:
        return self.path / ".git" / "thrum-sync" / "a-sync"

    def run(self, *args: str, agent: str | None = None, check: bool = True, input: str | None = None):
        env = dict(self.env)
        if agent:
            env["THRUM_NAME"] = agent
        proc = run_thrum(args, cwd=self.path, env=env, input=input)  # in this process (fixtures/thrum_cli.py)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"[{self.name}] thrum {' '.join(args)} -> {proc.returncode}\n"
                f"stdout: {proc.stdout}\nstderr: {proc.stderr}"
            )
        return proc

    def json(self, *args: str, agent: str | None = None):
        return json.loads(self.run(*args, "--json", agent=agent).stdout)

    def init(self) -> "Machine":
        self.run("init", "--non-interactive")
        self.paths = resolve(self.path)
        return self

    def agent(self, name: str, role: str, module: str = "core") -> None:
        self.run("quickstart", "--name", name, "--role", role, "--module", module)

    def adopt_identity(self, other: "Machine", name: str) -> None:
        """Make ``name`` (an identity of ``other``) an identity of this machine too: the
        same agent on two machines needs the same key (docs/design/trust.md)."""
        src, dst = other.path / ".thrum" / "identities", self.path / ".thrum" / "identities"
        dst.mkdir(parents=True, exist_ok=True)
        for suffix in (".json", ".key"):
            shutil.copy2(src / f"{name}{suffix}", dst / f"{name}{suffix}")

    def rpc(self, method: str, params: dict | None = None):
        return lifecycle.call(self.paths, method, params or {}, timeout=60)

    def sync(self) -> dict:
        return self.json("sync")

    def shards(self) -> dict[str, bytes]:
        return {p.relative_to(self.worktree).as_posix(): p.read_bytes() for p in sorted(self.worktree.rglob("*.jsonl"))}

    def stop(self) -> None:
        if self.paths is not None:
            lifecycle.stop(self.paths)


def machine_env(**extra) -> dict:
    env = dict(os.environ)
    for key in ("THRUM_NAME", "THRUM_ROLE", "THRUM_MODULE", "THRUM_LOCAL"):
        env.pop(key, None)
    env.update(
        {"THRUM_WS_PORT": "0", "THRUM_SYNC_INTERVAL": "3600", "THRUM_SYNC_DEBOUNCE": "3600", "THRUM_NO_AUTOSTART": "0"}
    )
    env.update(extra)
    return env


def event_ids(shard: bytes) -> list[str]:
    """The event ids of a shard's lines, in order; seals (thrum.trust) are not events."""
    out = []
    for line in shard.splitlines():
        try:
            d = json.loads(line)
            if d.get("type") == "seal":
                continue
            out.append(d["event_id"])
        except (ValueError, KeyError, TypeError, AttributeError):
            out.append(f"<malformed {line[:30]!r}>")
    return out
