"""Convergence and no loss on the segmented layout, as a property (hypothesis).

3-4 replicas of one remote, each with the daemon's data path (EventLog with a
small segment cap, so streams roll over often; the fold into SQLite; the sync cycle
with its fold of received lines), run any interleaving of sends, edits, receipts and
syncs. The same agent writes on two machines; events are dated now, far in the past,
far in the future, and on skewed clocks. After a round of syncs every replica holds
byte-identical files and trees, every event written anywhere, and answers every inbox
query the same.

The replicas' git stores are in memory (`thrum.sync.gitstore.memory`, proven against
libgit2 by test_gitstore_conformance.py): the property is the cycle's and the merge's,
and the examples run in half the time real clones took (2.3 against 4.6 s).
"""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.repos.memory import memory_replica
from thrum import events as ev
from thrum.store import database, projection
from thrum.store.log import EventLog
from thrum.sync.cycle import run_cycle
from thrum.sync.gitstore.memory import MemoryStore
from thrum.sync.replicate import Replicator
from thrum.sync.worktree import SYNC_REF

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))
from store_helpers import snapshot  # noqa: E402

CAP = 900  # bytes per segment: a few events each, so rollovers happen all the time
# agent -> the replicas it writes on (alice on two machines)
HOMES = {"alice": (0, 1), "bob": (1,), "carol": (2,), "dave": (3,)}
ROLES = {"alice": "implementer", "bob": "reviewer", "carol": "tester", "dave": "reviewer"}
TIMES = {
    "past": "2000-01-01T00:00:00.000Z",
    "future": "2099-12-31T23:59:59.999Z",
    "skewed": "2026-01-01T00:00:00.000Z",
}


class Node:
    """One replica: what the daemon does, in process (git, the log, SQLite). It lends its
    log to the sync cycle as the daemon's writer does (`thrum.sync.logaccess.LogAccess`)."""

    def __init__(self, path: Path, index: int, remote: MemoryStore):
        self.index = index
        path.mkdir(parents=True)
        self.worktree = path / "a-sync"
        self.replicator = Replicator(self.worktree, store=memory_replica(remote, self.worktree))
        self.log = EventLog(self.worktree, segment_cap=CAP)
        self.db = database.open_database(path / "projection.db")
        database.create_schema(self.db)
        self.lock = threading.Lock()
        self.dirty: set[str] = set()
        self.known: list[tuple[str, str]] = []  # (message id, author) this replica has seen
        self.sessions: dict[str, str] = {}

    def agents(self) -> list[str]:
        return [a for a, homes in HOMES.items() if self.index in homes]

    def write(self, events: list[dict]) -> None:
        touched = self.log.append(events)
        self.dirty.update(touched)
        positions = {s: self.log.end_position(s) for s in touched}
        projection.fold(self.db, [(ev.stream_for(e), e) for e in events], positions=positions)
        self._learn(events)

    def _learn(self, events) -> None:
        for d in events:
            if d.get("type") == "message.create":
                self.known.append((d["message_id"], d["agent_id"]))

    # -- the log as a sync cycle sees it (LogAccess)

    def locked(self):
        return self.lock

    def appended(self) -> list[str]:
        taken = sorted(self.dirty)
        self.dirty.clear()
        return taken

    def not_committed(self, paths: list[str]) -> None:
        self.dirty.update(paths)

    def nothing_appended(self) -> bool:
        return not self.dirty

    def read(self, path: str):
        return self.log.read_file(path)

    def apply_remote(self, writes, received):
        stats = self.log.replace_segments(writes)
        read = self.log.decode(received)
        positions = {s: self.log.end_position(s) for s in {*received, *(p for p, _ in writes)}}
        projection.fold(self.db, read.records, issues=read.issues, positions=positions)
        self._learn(d for _, d in read.records)
        return stats

    def sync(self) -> None:
        report = run_cycle(self.replicator, self)
        assert report.error is None and report.pushed

    def session(self, agent: str) -> str:
        if agent not in self.sessions:
            start = ev.SessionStart(agent_id=agent)
            self.sessions[agent] = start.session_id
            self.write([start.to_dict()])
        return self.sessions[agent]

    def files(self) -> dict[str, bytes]:
        return {p.relative_to(self.worktree).as_posix(): p.read_bytes() for p in self.worktree.rglob("*.jsonl")}


_op = st.one_of(
    st.tuples(
        st.just("send"),
        st.integers(0, 3),
        st.integers(0, 1),
        st.sampled_from(["now", *TIMES]),
        st.sampled_from([None, "@bob", "@alice", "@reviewer"]),
    ),
    st.tuples(st.just("edit"), st.integers(0, 3), st.integers(0, 50), st.sampled_from(["now", *TIMES])),
    st.tuples(st.just("read"), st.integers(0, 3), st.integers(0, 1), st.integers(0, 50)),
    st.tuples(st.just("sync"), st.integers(0, 3)),
)


def _apply(nodes: list[Node], op, written: set[str]) -> None:
    kind, i = op[0], op[1] % len(nodes)
    node = nodes[i]
    agents = [a for a in node.agents() if a in HOMES]
    if kind == "sync":
        node.sync()
        return
    if not agents:
        return
    if kind == "send":
        _, _, who, when, to = op
        author = agents[who % len(agents)]
        refs = (ev.Tag("mention", to[1:]),) if to else ()
        e = ev.MessageCreate(
            agent_id=author,
            session_id=node.session(author),
            refs=refs,
            body=ev.Body(f"{author} on {i}: " + "words " * (len(written) % 7)),
            **({"timestamp": TIMES[when]} if when in TIMES else {}),
        )
    elif kind == "edit":
        _, _, slot, when = op
        mine = [(m, a) for m, a in node.known if a in agents]
        if not mine:
            return
        message_id, author = mine[slot % len(mine)]
        e = ev.MessageEdit(
            message_id=message_id,
            agent_id=author,
            session_id=node.session(author),
            body=ev.Body(f"edited on {i} ({len(written)})"),
            **({"timestamp": TIMES[when]} if when in TIMES else {}),
        )
    else:
        _, _, who, slot = op
        if not node.known:
            return
        reader = agents[who % len(agents)]
        e = ev.MessageRead(
            agent_id=reader, session_id=node.session(reader), message_ids=(node.known[slot % len(node.known)][0],)
        )
    d = e.to_dict()
    node.write([d])
    written.add(d["event_id"])


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3, 4), st.lists(_op, min_size=1, max_size=30))
def test_any_interleaving_converges_to_identical_trees_and_inboxes(n, ops):
    with tempfile.TemporaryDirectory() as tmp:
        remote = MemoryStore()
        nodes = [Node(Path(tmp) / f"replica{i}", i, remote) for i in range(n)]
        written: set[str] = set()
        for node in nodes:  # every agent registers on its first machine
            regs = [
                ev.AgentRegister(agent_id=a, role=ROLES[a]).to_dict()
                for a in node.agents()
                if HOMES[a][0] == node.index
            ]
            if regs:
                node.write(regs)
                written.update(d["event_id"] for d in regs)
        for op in ops:
            _apply(nodes, op, written)
        for _ in range(2):  # a round of syncs, twice: everyone has everything
            for node in nodes:
                node.sync()

        heads = {node.replicator.store.commit(node.replicator.store.ref(SYNC_REF)).tree for node in nodes}
        assert len(heads) == 1, "trees differ"
        files = nodes[0].files()
        assert all(node.files() == files for node in nodes[1:]), "files differ"
        in_log = {ev.decode_line(line)["event_id"] for data in files.values() for line in data.splitlines()}
        assert written <= in_log, "an event was lost"
        for path, data in files.items():  # no file grows past the cap by more than its writers' share
            assert len(data) <= CAP * (len(HOMES.get(path.split("/")[1], ())) or n) + 1200, path
        mids = sorted({m for node in nodes for m, _ in node.known})
        agents = sorted(a for a, homes in HOMES.items() if homes[0] < n)
        views = [snapshot(node.db, agents, sorted(set(ROLES.values())), [], mids, with_issues=False) for node in nodes]
        assert all(v == views[0] for v in views[1:]), "inboxes differ"
