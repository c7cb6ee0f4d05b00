"""A rebuild whose lines a second process judges (`thrum.store.judge_process`) builds the
projection, and leaves the fold the state (keys, facts, lines waiting), that judging in
the folding process does, hostile lines included; a second process that fails, dies
halfway or says something malformed costs the rebuild time, never a verdict (issue 29)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
from test_rebuild_equivalence import rows

from fixtures.signed import SigningAgent as Agent
from thrum import events as ev
from thrum.store import database, projection, rebuild
from thrum.store.facts import FactFile
from thrum.store.judge_process import ApartJudge
from thrum.store.log import EventLog
from thrum.store.verified import VerifiedFold
from thrum.trust import keys, signing
from thrum.trust.ring import KeyRing
from thrum.trust.roster import Roster
from thrum.trust.teamroot import TeamRoot, new_log_id
from thrum.trust.verdicts import VerdictMemory
from thrum.trust.verify import Verifier

T0 = 1_790_000_000_000  # 2026-09: in the past


def _at(ms: int, rand: int = 7) -> str:
    from ulid import ULID

    return str(ULID.from_int((ms << 80) | rand))


def _dated(event: ev.Event, ms: int) -> dict:
    from datetime import datetime, timezone

    stamp = datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return {**event.to_dict(), "event_id": _at(ms), "timestamp": stamp}


def _message(name: str, key: keys.PublicKey, content: str, ms: int) -> dict:
    return _dated(
        ev.MessageCreate(
            message_id=signing.new_message_id(key.tag),
            agent_id=name,
            session_id=f"ses_{name}",
            body=ev.Body(content),
        ),
        ms,
    )


def _write(root: Path, shard: str, lines: list[bytes]) -> None:
    path = root / shard
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))


class Team:
    """A team under a root (admin alice, member bob) and a log with every kind of line a
    hostile remote may carry: an admission (carol), an agent never admitted (mallory:
    waits), one that never registers (dave: unknown signer), a forgery, a rotation and a
    line signed with the old key after it, a revocation and a line after it, a group
    change by an agent who may not make it, lines that are no events, and (``future``) a
    line dated ahead in the middle of the log."""

    def __init__(self, root: Path, *, future: bool):
        alice, bob, carol, mallory, dave = (Agent(n) for n in ("alice", "bob", "carol", "mallory", "dave"))
        self.root = TeamRoot(
            log_id=new_log_id(), policy="admins", admins={"alice": alice.public}, members={"bob": bob.public}
        )
        new_bob = keys.generate()
        new_pub = keys.PublicKey(keys.public_raw(new_bob))
        events = [
            alice.register(),
            bob.register(),
            mallory.register(),
            alice.line(_dated(ev.AgentAdmit(agent_id="carol", by="alice", public_key=carol.public.b64), T0)),
            b"not json at all\n",
            carol.register(),
            carol.line(_dated(ev.GroupCreate(name="crew", created_by="carol"), T0 + 100)),
            bob.line(_dated(ev.GroupMemberAdd(group="crew", member_value="bob", agent_id="bob"), T0 + 300)),
            bob.line(_dated(ev.AgentRotate(agent_id="bob", public_key=new_pub.b64, old_key=bob.public.b64), T0 + 2000)),
            alice.line(
                _dated(
                    ev.AgentRevoke(agent_id="bob", by="alice", public_key=new_pub.b64, from_event=_at(T0 + 5000, 0)),
                    T0 + 6000,
                )
            ),
        ]
        if future:
            events.append(alice.start(timestamp="2099-01-01T00:00:00Z"))
        events += [dave.start(), b'{"type": "message.create"}\n']
        self.log = root / "log"
        _write(self.log, "events/000001.jsonl", events)
        _write(
            self.log,
            "messages/alice/000001.jsonl",
            [alice.send(f"a{i}") for i in range(5)] + [alice.send("forged", key=mallory.private)],
        )
        _write(
            self.log,
            "messages/bob/000001.jsonl",
            [
                bob.line(_message("bob", bob.public, "before", T0 + 1000)),
                ev.encode_line(signing.sign(_message("bob", new_pub, "new key", T0 + 3000), "bob", new_bob)),
                bob.line(_message("bob", bob.public, "thief with the old key", T0 + 4000)),
                ev.encode_line(signing.sign(_message("bob", new_pub, "after revoke", T0 + 5500), "bob", new_bob)),
            ],
        )
        _write(self.log, "messages/carol/000001.jsonl", [carol.send(f"c{i}") for i in range(4)])
        _write(self.log, "messages/dave/000001.jsonl", [dave.send("who am i")])
        _write(self.log, "messages/mallory/000001.jsonl", [mallory.send("let me in")])

    def fold(self, state: Path) -> VerifiedFold:
        """A fold as the daemon makes one (`daemon.team.open_trust`): its state in files under ``state``."""
        ring = KeyRing(state / "known_keys.json", None)
        verifier = Verifier(ring, roster=Roster(ring, self.root))
        fold = VerifiedFold(verifier, VerdictMemory(state / "verified-lines"), facts=FactFile(state / "facts.jsonl"))
        fold.prime()
        return fold


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(rebuild, "READ_CHUNK", 300)  # a few lines a read
    monkeypatch.setattr(rebuild, "REBUILD_BATCH", 4)  # and many batches: keys and facts learned across them


def _rebuilt(tmp_path: Path, team: Team, name: str, judge: str):
    fold = team.fold(tmp_path / name)
    db = database.open_database(tmp_path / f"{name}.db")
    result = projection.rebuild(db, EventLog(team.log), fold_fn=fold, judge=judge)
    return db, result, fold


def _state(fold: VerifiedFold, state: Path) -> tuple:
    roster = fold.verifier.roster
    facts = sorted((state / "facts.jsonl").read_bytes().splitlines())
    return fold.verifier.ring.known(), roster.to_json(), fold.waiting_lines(), facts


@pytest.fixture
def called(monkeypatch) -> list[str]:
    """How each batch reached the fold: judged by the second process, or with its fold."""
    ways: list[str] = []
    ruling, call = ApartJudge.ruling, VerifiedFold.__call__

    def spy_ruling(self, result):
        found = ruling(self, result)
        if found is not None and result.records:
            ways.append("apart")
        return found

    def spy_call(self, *a, **kw):
        ways.append("with the fold")
        return call(self, *a, **kw)

    monkeypatch.setattr(ApartJudge, "ruling", spy_ruling)
    monkeypatch.setattr(VerifiedFold, "__call__", spy_call)
    return ways


@pytest.mark.parametrize("future", [False, True], ids=["to-the-end", "line-dated-ahead"])
def test_a_second_process_judges_as_the_folding_process_does(tmp_path, small_batches, called, future):
    team = Team(tmp_path, future=future)
    here, here_result, here_fold = _rebuilt(tmp_path, team, "here", "here")
    assert set(called) == {"with the fold"}
    called.clear()
    apart, apart_result, apart_fold = _rebuilt(tmp_path, team, "apart", "apart")
    assert called[0] == "apart"
    if future:  # the batches after the one holding a line are judged with their fold
        assert called[-1] == "with the fold" and "apart" not in called[called.index("with the fold") :]
    else:
        assert set(called) == {"apart"}
    assert rows(apart) == rows(here)
    counts = projection.fold_counts(here)
    assert projection.fold_counts(apart) == counts
    assert {"revoked", "bad-signature", "not-admitted", "unknown-signer", "not-authorized", "malformed"} <= set(counts)
    assert ("future" in counts) == future
    assert (apart_result.malformed, apart_result.refused) == (here_result.malformed, here_result.refused)
    assert _state(apart_fold, tmp_path / "apart") == _state(here_fold, tmp_path / "here")
    assert apart_fold.waiting_keys("mallory") == here_fold.waiting_keys("mallory") != []
    texts = {r[0] for r in here.execute_sql("SELECT body_content FROM messages").fetchall()}
    assert {"a0", "c3", "before", "new key"} <= texts
    assert not texts & {"forged", "thief with the old key", "after revoke", "who am i", "let me in"}
    assert database.schema_version(apart) == database.SCHEMA_VERSION


def test_a_rebuild_judged_apart_leaves_what_the_next_start_primes_from(tmp_path, small_batches):
    """The keys, facts and verdicts the second process learned are in the fold's files: a
    daemon started after the rebuild judges as one that judged the log itself."""
    team = Team(tmp_path, future=False)
    _rebuilt(tmp_path, team, "here", "here")
    _rebuilt(tmp_path, team, "apart", "apart")
    again_here, again_apart = team.fold(tmp_path / "here"), team.fold(tmp_path / "apart")
    assert again_apart.verifier.ring.known() == again_here.verifier.ring.known()
    assert again_apart.verifier.roster.to_json() == again_here.verifier.roster.to_json()
    memory = (tmp_path / "apart" / "verified-lines").read_bytes()
    assert len(memory) == len((tmp_path / "here" / "verified-lines").read_bytes()) > 0


def _python(tmp_path: Path, body: str) -> str:
    """An interpreter the rebuild starts its second process with: ``body`` (sh), given the real one as $REAL."""
    path = tmp_path / "python"
    path.write_text(f"#!/bin/sh\nREAL='{sys.executable}'\n{body}\n")
    path.chmod(0o755)
    return str(path)


LIAR = """
import json, struct, sys
sys.stdin.buffer.read()
body = json.dumps({"t": "batch", "n": 4, "ends": {}, "extra": [], "refused": [], "future": [], "waiting": [],
                   "retired": [], "resolved": [], "holds": False}).encode()
places = struct.pack("=4i", 0, 1, 2, 4000)  # not the batch read (its ends), a place outside it
sys.stdout.buffer.write(struct.pack(">II", len(body), len(places)) + body + places)
"""


@pytest.mark.parametrize(
    "failing",
    [
        "echo 'it cannot start' >&2; exit 3",
        '"$REAL" "$@" | head -c 700',  # dies in the middle of its output
        'exec "$REAL" -c \'' + LIAR + "'",  # says something malformed
    ],
    ids=["exits", "dies-halfway", "lies"],
)
def test_a_failing_second_process_has_the_load_done_again_judging_here(
    tmp_path, small_batches, monkeypatch, caplog, failing
):
    team = Team(tmp_path, future=False)
    here, here_result, here_fold = _rebuilt(tmp_path, team, "here", "here")
    monkeypatch.setattr(sys, "executable", _python(tmp_path, failing))
    with caplog.at_level(logging.WARNING, logger="thrum.store.rebuild"):
        apart, apart_result, apart_fold = _rebuilt(tmp_path, team, "apart", "apart")
    assert any("second process failed" in r.getMessage() for r in caplog.records)
    assert rows(apart) == rows(here)
    assert projection.fold_counts(apart) == projection.fold_counts(here)
    assert (apart_result.malformed, apart_result.refused) == (here_result.malformed, here_result.refused)
    assert _state(apart_fold, tmp_path / "apart") == _state(here_fold, tmp_path / "here")
    assert database.schema_version(apart) == database.SCHEMA_VERSION


def test_a_fold_whose_state_is_not_all_in_files_judges_here(tmp_path, small_batches, called):
    """Without a file for its keys (or with lines waiting from before), nothing is handed
    to a second process: the rebuild judges in its own."""
    team = Team(tmp_path, future=False)
    fold = VerifiedFold(Verifier(KeyRing(None, None), roster=None))
    db = database.open_database(tmp_path / "plain.db")
    projection.rebuild(db, EventLog(team.log), fold_fn=fold, judge="apart")
    assert called and set(called) == {"with the fold"}
    called.clear()
    waiting = team.fold(tmp_path / "waiting")
    projection.rebuild(database.open_database(tmp_path / "w1.db"), EventLog(team.log), fold_fn=waiting, judge="here")
    assert waiting.waiting_lines()  # mallory waits for an admission
    projection.rebuild(database.open_database(tmp_path / "w2.db"), EventLog(team.log), fold_fn=waiting, judge="apart")
    assert set(called) == {"with the fold"}


def test_auto_judges_apart_only_a_large_log_on_two_cores(tmp_path, monkeypatch, called):
    team = Team(tmp_path, future=False)
    size = sum(p.stat().st_size for p in team.log.rglob("*.jsonl"))
    monkeypatch.setattr(rebuild, "JUDGE_APART_BYTES", size + 1)
    _rebuilt(tmp_path, team, "small", "auto")
    assert set(called) == {"with the fold"}
    called.clear()
    monkeypatch.setattr(rebuild, "JUDGE_APART_BYTES", size)
    _rebuilt(tmp_path, team, "large", "auto")
    assert set(called) == ({"apart"} if rebuild.usable_cores() > 1 else {"with the fold"})
    if len(os.sched_getaffinity(0)) > 1:
        called.clear()
        monkeypatch.setattr(rebuild, "usable_cores", lambda: 1)
        _rebuilt(tmp_path, team, "one-core", "auto")
        assert set(called) == {"with the fold"}
