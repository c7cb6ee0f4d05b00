"""Last seen comes from the log (issue 30, item 5): an agent's newest event that shows it
acting, the same on every replica holding the same events, and rebuilt with the
projection. Before, ``last_seen_at`` was this machine's memory of calls: another
machine's agent had none, and a rebuilt database forgot everyone's."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from thrum import events as ev
from thrum import presence
from thrum.store import database, directory, projection
from thrum.store.log import EventLog

from store_helpers import Events, fold, mid


def _seen(db) -> dict[str, str]:
    return {a["agent_id"]: a["last_seen_at"] for a in directory.list_agents(db)["agents"]}


def _heartbeat(e: Events, agent: str, ts: str | None = None):
    return e.rec(ev.AgentHeartbeat(agent_id=agent, **e._common(ts)))


def test_last_seen_is_the_newest_event_of_any_kind_in_any_order(db):
    e = Events()
    reg_a, reg_b = e.register("alice", "dev"), e.register("bob", "qa")
    c = e.create("alice", "hi", mentions=["bob"])
    read = e.read("bob", mid(c))
    beat = _heartbeat(e, "alice")
    fold(db, beat, read)  # before their registrations: kept, listed once they register
    assert _seen(db) == {}
    fold(db, c, reg_b, reg_a)
    # bob only registered and read: registered, never seen acting (a read mark is not)
    assert _seen(db) == {"alice": beat[1]["timestamp"], "bob": ""}
    bob = e.create("bob", "ok", mentions=["alice"])
    fold(db, bob)
    assert _seen(db)["bob"] == bob[1]["timestamp"]
    fold(db, e.create("alice", "older", ts="2026-01-01T00:00:00.000Z"))  # a late event never moves it back
    assert _seen(db)["alice"] == beat[1]["timestamp"]


def test_what_can_be_written_for_an_agent_that_is_not_there_is_not_presence(db):
    """A registration (a script, a teammate's set-up), a session begun for whoever a call
    names, read marks pressed for an agent in the Web UI (watching is not acting, issue
    27), delivered receipts written by the daemon holding the key when mail arrives, a
    crashed session ended by the next daemon start: none shows the agent acting (an agent
    that reads is seen by its daemon, which writes heartbeats for it)."""
    e = Events()
    c = e.create("alice", "hi", mentions=["bob"])
    fold(db, e.register("alice", "dev"), e.register("bob", "qa"), c, e.session_start("bob"))
    marks = [e.read("bob", mid(c)), e.archive("bob", mid(c)), e.delivered("bob", mid(c))]
    fold(db, *marks, e.surfaced("bob", mid(c)), e.acked("bob", mid(c)), e.session_end("ses_bob", agent="bob"))
    assert _seen(db) == {"alice": c[1]["timestamp"], "bob": ""}


def test_a_timestamp_in_another_spelling_is_compared_as_the_instant_it_names(db):
    e = Events()
    fold(db, e.register("alice", "dev"), _heartbeat(e, "alice", ts="2026-02-03T10:00:05.500Z"))
    fold(db, _heartbeat(e, "alice", ts="2026-02-03T10:00:05Z"))  # earlier, though it sorts later as text
    assert _seen(db)["alice"] == "2026-02-03T10:00:05.500Z"


def test_a_rebuild_gives_every_last_seen_back(db, tmp_log: EventLog, tmp_path):
    e = Events()
    records = [e.register("alice", "dev"), e.register("bob", "qa"), _heartbeat(e, "alice"), e.create("bob", "x")]
    tmp_log.append([d for _, d in records])
    projection.catch_up(db, tmp_log)
    fresh = database.open_database(tmp_path / "fresh.db")
    projection.rebuild(fresh, tmp_log)
    assert _seen(fresh) == _seen(db) == {"alice": records[2][1]["timestamp"], "bob": records[3][1]["timestamp"]}


def test_the_one_definition_of_active_idle_and_offline():
    now = datetime(2026, 11, 27, 10, 0, 0, tzinfo=timezone.utc)

    def ago(s: float) -> str:
        return (now - timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

    assert presence.status(ago(0), now) == "active"
    assert presence.status(ago(119), now) == "active"
    assert presence.status(ago(121), now) == "idle"
    assert presence.status(ago(899), now) == "idle"
    assert presence.status(ago(901), now) == "offline"
    assert presence.status("", now) == presence.status(None, now) == presence.status("junk", now) == "offline"
    assert presence.status(ago(-300), now) == "active"  # a clock ahead counts as now
