"""Machines whose daemons run in the test's own trio run, their git stores in memory.

Where a test asserts what the daemons' sync cycles decide (the merge, races, segments
rolled over on both sides, the log and each projection converging), a repository and
a transport add nothing to it, and a CLI process per request only adds time. Each
machine here is a real checkout with its own daemon, log, SQLite, signer and keys; its
sync goes through the git store's fake (`thrum.sync.gitstore.memory`, proven against
libgit2 by tests/sync/test_gitstore_conformance.py) to one remote in memory, handed to
the daemon through its constructor (`Daemon(git_store=...)`). Requests go straight to
the dispatcher (`fixtures.inprocess.rpc`). Transports, git on disk and the CLI are the
other replication tests' subject (`machines`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import trio

from fixtures import waiting
from fixtures.daemon_env import daemon_env
from fixtures.inprocess import rpc
from fixtures.repos.builders import make_repo
from fixtures.repos.memory import memory_replica
from thrum import lifecycle
from thrum.daemon.server import Daemon
from thrum.paths import ThrumPaths
from thrum.sync.gitstore.memory import MemoryStore
from thrum.sync.worktree import SYNC_REF

# As the CLI machines: no timer or debounce cycle (each test syncs when it means to), no
# fixed port; and no heartbeats (written by the clock, they would make replicas compared
# byte for byte differ: tests/replication/test_presence.py is about them).
CONFIG = {"ws_port": 0, "sync_interval": 3600, "sync_debounce": 3600, "presence_interval": 0}


DEADLINE = 30.0


async def until(check, what: str, *, within: float = DEADLINE, every: float = 0.05):
    """The first truthy value ``await check()`` gives, polled for at most ``within`` s of
    trio's clock, first after ``every`` s, then less often (`fixtures.waiting.until`, for
    daemons in this run).

    Raises AssertionError naming ``what`` (and the last value seen) when time runs out.
    """
    deadline = trio.current_time() + within
    for pause in waiting.pauses(every):
        got = await check()
        if got:
            return got
        if trio.current_time() > deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what} (last: {got!r})")
        await trio.sleep(pause)
    raise AssertionError("unreachable")  # pauses() never ends


class MemoryMachine:
    def __init__(self, path: Path, paths: ThrumPaths, store: MemoryStore, daemon: Daemon):
        self.path = path
        self.paths = paths
        self.store = store
        self.daemon = daemon

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def worktree(self) -> Path:
        return self.path / ".git" / "thrum-sync" / "a-sync"

    async def rpc(self, method: str, params: dict | None = None) -> dict:
        return await rpc(self.daemon, method, params or {})

    async def agent(self, name: str, role: str, module: str = "") -> dict:
        return await self.rpc("agent.register", {"name": name, "role": role, "module": module})

    async def pushed(self) -> None:
        """Wait until the remote holds every event written here (by the daemon's own cycles:
        after a write, its debounced cycle)."""

        async def nothing_pending() -> bool:
            return (await self.rpc("sync.status"))["pending_events"] == 0

        await until(nothing_pending, f"{self.name}'s own cycle to push what it wrote")

    async def send(self, caller: str, content: str, *to: str) -> dict:
        return await self.rpc("message.send", {"caller": caller, "content": content, "to": list(to)})

    async def inbox(self, agent: str, **filters) -> list[dict]:
        """``agent``'s inbox as ``thrum inbox`` asks for it (others' messages, newest first)."""
        params = {"caller": agent, "exclude_own": True, "page_size": 100, "sort_by": "created_at", "sort_order": "desc"}
        return (await self.rpc("message.list", {**params, **filters}))["messages"]

    async def sync(self) -> dict:
        return await self.rpc("sync.run")

    def adopt_identity(self, other: MemoryMachine, name: str) -> None:
        """Make ``name`` (an identity of ``other``) an identity of this machine too: the
        same agent on two machines needs the same key (docs/design/trust.md). Registered
        over RPC, an agent has its key and no CLI identity file."""
        src, dst = other.paths.identities, self.paths.identities
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f"{name}.key", dst / f"{name}.key")

    def shards(self) -> dict[str, bytes]:
        return {p.relative_to(self.worktree).as_posix(): p.read_bytes() for p in sorted(self.worktree.rglob("*.jsonl"))}

    def history(self) -> list:
        """The commits of this machine's ``a-sync``, newest first."""
        return list(self.store.ancestors(self.store.ref(SYNC_REF)))


class MemoryFleet:
    """Factory of machines sharing one remote in memory: ``await fleet(n, **config)``."""

    def __init__(self, tmp_path: Path, nursery: trio.Nursery):
        self.tmp_path = tmp_path
        self.nursery = nursery
        self.remote = MemoryStore()
        self.made: list[MemoryMachine] = []

    async def __call__(self, n: int = 2, **config) -> list[MemoryMachine]:
        return [await self._machine(config) for _ in range(n)]

    async def _machine(self, config: dict) -> MemoryMachine:
        path = self.tmp_path / f"m{len(self.made)}"
        make_repo(path)
        paths = lifecycle.init_repo(path, start_daemon=False)
        paths.config.write_text(json.dumps({**CONFIG, **config}))
        worktree = path / ".git" / "thrum-sync" / "a-sync"
        store = memory_replica(self.remote, worktree)
        with daemon_env():  # the test's config, not THRUM_* variables the caller exported
            daemon = Daemon(paths, git_store=lambda _worktree: store)
        await self.nursery.start(daemon.run)
        machine = MemoryMachine(path, paths, store, daemon)
        self.made.append(machine)
        return machine

    def stop(self) -> None:
        for m in self.made:
            m.daemon.request_shutdown()
