"""The hub on its own (no daemon, no sockets): delivery, dedupe per connection,
resume with live events arriving mid-replay, session ends, target refresh."""

from __future__ import annotations

import itertools
import sys

import trio
import trio.testing

from thrum import events as ev
from thrum.store import queries
from thrum.daemon import replay_ring
from thrum.daemon.hub import Hub
from thrum.store.log import EventLog

_ids = itertools.count(1)


class FakeConn:
    def __init__(self, paced: bool = False):
        self.sent: list[tuple[str, dict]] = []
        self.closed = False
        self.seq = 0
        self.gate = trio.Event() if paced else None
        if paced:
            self.wait_for_room = self._wait_for_room

    def notify(self, method: str, params: dict) -> None:
        self.seq += 1
        self.sent.append((method, {**params, "seq": self.seq}))

    async def _wait_for_room(self) -> None:
        await self.gate.wait()

    def methods(self) -> list[tuple[str, str]]:
        return [(m, p.get("message_id", "")) for m, p in self.sent]


class FakeWriter:
    def __init__(self):
        self.targets: dict[str, list[str]] = {}
        self.log = None

    async def read(self, fn, *args):
        if fn is queries.targets_of:
            return self.targets.get(args[0], [args[0], "everyone"])
        raise AssertionError(f"unexpected query {fn.__name__}")


class FakeConfig:
    values: dict = {}


class FakeDaemon:
    def __init__(self, nursery):
        self.writer = FakeWriter()
        self.nursery = nursery
        self.config = FakeConfig()


def make_hub(daemon: FakeDaemon) -> Hub:
    """The hub as the daemon makes it, from the fake's writer, nursery and ring settings."""
    values = daemon.config.values
    ring = {k: int(values[f"subscription_{k}"]) for k in ("ring_size", "ring_bytes") if f"subscription_{k}" in values}
    return Hub(daemon.writer.read, daemon.writer.log, daemon.nursery, **ring)


def create(scopes=(), mentions=(), agent="alice") -> dict:
    n = next(_ids)
    eid = ev.new_ulid()
    return {
        "type": "message.create",
        "event_id": eid,
        "timestamp": ev.now_rfc3339(),
        "v": 1,
        "message_id": f"msg_{n}",
        "thread_id": "",
        "agent_id": agent,
        "session_id": "ses_1",
        "body": {"format": "markdown", "content": f"m{n}", "structured": ""},
        "scopes": [{"type": t, "value": v} for t, v in scopes],
        "refs": [{"type": "mention", "value": m} for m in mentions],
    }


async def _eventually(condition) -> None:
    """Reads of the log run in worker threads, which `wait_all_tasks_blocked` does not wait for."""
    with trio.fail_after(10):
        while not condition():  # noqa: ASYNC110 - a thread's progress, not a trio task's
            await trio.sleep(0.01)


async def test_hub_one_notification_per_connection_however_many_subscriptions_match(nursery):
    hub = make_hub(FakeDaemon(nursery))
    a, b = FakeConn(), FakeConn()
    await hub.subscribe(a, filter_type="all")
    await hub.subscribe(a, filter_type="scope", scope={"type": "t", "value": "1"})
    await hub.subscribe(b, filter_type="scope", scope={"type": "t", "value": "2"})
    e1, e2 = create(scopes=[("t", "1")]), create(scopes=[("t", "3")])
    await hub.publish([e1, e2], "local")
    assert a.methods() == [("message.create", e1["message_id"]), ("message.create", e2["message_id"])]
    assert b.sent == []


async def test_hub_replay_holds_live_events_and_sends_nothing_twice(nursery):
    hub = make_hub(FakeDaemon(nursery))
    scope = {"type": "t", "value": "r"}
    events = [create(scopes=[("t", "r")]) for _ in range(5)]
    await hub.publish(events[:3], "local")
    conn = FakeConn(paced=True)
    await hub.subscribe(conn, filter_type="scope", scope=scope, since_event_id=events[0]["event_id"])
    await trio.testing.wait_all_tasks_blocked()  # the replay waits for room
    await hub.publish(events[3:], "local")  # live events during the replay: held back
    assert conn.sent == []
    conn.gate.set()
    await trio.testing.wait_all_tasks_blocked()
    got = [(m, p.get("message_id"), p.get("replay", False)) for m, p in conn.sent]
    assert got == [
        ("message.create", events[1]["message_id"], True),
        ("message.create", events[2]["message_id"], True),
        ("message.create", events[3]["message_id"], False),
        ("message.create", events[4]["message_id"], False),
        ("subscription.replayed", None, False),
    ]
    more = create(scopes=[("t", "r")])
    await hub.publish([more], "local")  # and afterwards straight through
    assert conn.sent[-1][1]["message_id"] == more["message_id"]


async def test_hub_a_subscription_deleted_mid_replay_stops_and_takes_no_event_from_the_one_kept(nursery):
    """A client that resumed twice keeps the newer subscription and deletes the older one
    while both still replay: nothing more comes for the deleted one, and an event published
    meanwhile reaches the client through the one it kept."""
    hub = make_hub(FakeDaemon(nursery))
    history = [create() for _ in range(3)]
    await hub.publish(history, "local")
    conn = FakeConn(paced=True)
    older = await hub.subscribe(conn, filter_type="all", since_event_id=history[0]["event_id"])
    kept = await hub.subscribe(conn, filter_type="all", since_event_id=history[0]["event_id"])
    await trio.testing.wait_all_tasks_blocked()  # both replays wait for room
    live = create()
    await hub.publish([live], "local")
    assert hub.unsubscribe(conn, older.id)
    conn.gate.set()
    await trio.testing.wait_all_tasks_blocked()
    assert [p for _, p in conn.sent if p.get("subscription_id") == older.id] == []
    got = [(m, p.get("message_id"), p.get("replay", False)) for m, p in conn.sent]
    assert got == [
        ("message.create", history[1]["message_id"], True),
        ("message.create", history[2]["message_id"], True),
        ("message.create", live["message_id"], False),
        ("subscription.replayed", None, False),
    ]
    assert {p["subscription_id"] for _, p in conn.sent} == {kept.id}


async def test_hub_a_live_subscription_delivers_at_once_while_another_of_its_connection_replays(nursery):
    """Events published while one subscription of a connection replays come at once
    through the connection's live subscription, whichever was made first, and the replay
    does not send them again (the client may delete either)."""
    hub = make_hub(FakeDaemon(nursery))
    history = [create() for _ in range(2)]
    await hub.publish(history, "local")
    conn = FakeConn(paced=True)
    replaying = await hub.subscribe(conn, filter_type="all", since_event_id=history[0]["event_id"])
    live_sub = await hub.subscribe(conn, filter_type="all")
    await trio.testing.wait_all_tasks_blocked()
    live = create()
    await hub.publish([live], "local")
    assert conn.methods() == [("message.create", live["message_id"])]
    assert conn.sent[0][1]["subscription_id"] == live_sub.id
    conn.gate.set()
    await trio.testing.wait_all_tasks_blocked()
    assert [p.get("message_id") for _, p in conn.sent].count(live["message_id"]) == 1
    assert conn.sent[-1][0] == "subscription.replayed" and conn.sent[-1][1]["subscription_id"] == replaying.id


async def test_hub_resume_from_beyond_the_ring_reads_the_log_in_pieces_and_live_events_follow(nursery, tmp_path):
    """A resume from before the ring reads the log a piece at a time; live events that
    arrive meanwhile come from the log's next piece (they are not held, so a long replay
    cannot overflow the held queue), and each event reaches the client once, in order."""
    daemon = FakeDaemon(nursery)
    daemon.config.values = {"subscription_ring_size": 3}
    (tmp_path / "log").mkdir()
    daemon.writer.log = event_log = EventLog(tmp_path / "log", segment_cap=1024)
    hub = make_hub(daemon)
    hub.backlog_chunk = 7
    history = [create() for _ in range(30)]
    event_log.append(history)
    await hub.publish(history, "sync")  # only the last 3 stay in the ring
    conn = FakeConn(paced=True)
    sub = await hub.subscribe(conn, filter_type="all", since_event_id=history[4]["event_id"])
    await _eventually(lambda: sub.rescan_above is not None)  # the first piece is read and waits for room
    live = [create() for _ in range(12)]
    for d in live:  # the daemon publishes what it has appended
        event_log.append([d])
        await hub.publish([d], "local")
    conn.gate.set()
    await _eventually(lambda: conn.sent and conn.sent[-1][0] == "subscription.replayed")
    got = [(m, p.get("message_id"), p.get("replay", False)) for m, p in conn.sent]
    expected = [d["message_id"] for d in history[5:] + live]
    assert got[:-1] == [("message.create", m, True) for m in expected]
    assert got[-1] == ("subscription.replayed", None, False)
    assert conn.sent[-1][1]["replayed"] == len(expected)
    assert hub.segments.files_read > 0
    more = create()
    event_log.append([more])
    await hub.publish([more], "local")  # and afterwards straight through
    assert conn.sent[-1][1]["message_id"] == more["message_id"] and "replay" not in conn.sent[-1][1]


async def test_hub_a_replay_reading_the_log_never_keeps_live_events_from_the_connections_other_subscriptions(
    nursery, tmp_path
):
    """A client resumes with a new subscription and deletes the old one when the new one
    answers: an event published meanwhile must reach it through whichever is live."""
    daemon = FakeDaemon(nursery)
    daemon.config.values = {"subscription_ring_size": 3}
    (tmp_path / "log").mkdir()
    daemon.writer.log = event_log = EventLog(tmp_path / "log")
    hub = make_hub(daemon)
    hub.backlog_chunk = 7
    history = [create() for _ in range(30)]
    event_log.append(history)
    await hub.publish(history, "sync")
    conn = FakeConn(paced=True)
    resuming = await hub.subscribe(conn, filter_type="all", since_event_id=history[4]["event_id"])
    await _eventually(lambda: resuming.rescan_above is not None)  # its first piece waits for room
    await hub.subscribe(conn, filter_type="all")  # the connection's other subscription
    live = create()
    event_log.append([live])
    await hub.publish([live], "local")
    assert conn.sent and conn.sent[-1][1]["message_id"] == live["message_id"]
    assert hub.unsubscribe(conn, resuming.id)


async def test_hub_resume_from_the_log_also_replays_events_synced_late_with_older_ids(nursery, tmp_path):
    """An event made earlier on another machine arrives by sync after the resume point:
    the log's event_id order would skip it, the ring knows it arrived later."""
    daemon = FakeDaemon(nursery)
    daemon.config.values = {"subscription_ring_size": 5}
    (tmp_path / "log").mkdir()
    daemon.writer.log = event_log = EventLog(tmp_path / "log")
    hub = make_hub(daemon)
    made_elsewhere = create(agent="bob")  # the oldest id of all
    history = [create() for _ in range(10)]
    event_log.append(history)
    await hub.publish(history, "local")
    event_log.append([made_elsewhere])
    await hub.publish([made_elsewhere], "sync")  # arrives last
    conn = FakeConn(paced=True)
    conn.gate.set()
    await hub.subscribe(conn, filter_type="all", since_event_id=history[2]["event_id"])  # before the ring
    await _eventually(lambda: conn.sent and conn.sent[-1][0] == "subscription.replayed")
    got = [p["message_id"] for m, p in conn.sent if m == "message.create"]
    assert got == [made_elsewhere["message_id"]] + [d["message_id"] for d in history[3:]]


async def test_hub_ring_forgets_the_oldest(nursery):
    daemon = FakeDaemon(nursery)
    daemon.config.values = {"subscription_ring_size": 2}
    hub = make_hub(daemon)
    events = [create() for _ in range(3)]
    await hub.publish(events, "local")
    assert [d["event_id"] for d, _ in hub.ring] == [events[1]["event_id"], events[2]["event_id"]]
    assert events[0]["event_id"] not in hub.ring and hub.ring.after(events[0]["event_id"]) is None


async def test_hub_session_end_ends_its_subscriptions_and_says_so(nursery):
    hub = make_hub(FakeDaemon(nursery))
    conn = FakeConn()
    sub = await hub.subscribe(conn, filter_type="all", session_id="ses_x", agent="alice")
    other = await hub.subscribe(conn, filter_type="all", session_id="ses_y", agent="bob")
    end = {
        "type": "agent.session.end",
        "event_id": ev.new_ulid(),
        "timestamp": ev.now_rfc3339(),
        "v": 1,
        "session_id": "ses_x",
        "agent_id": "alice",
        "reason": "crash",
    }
    await hub.publish([end], "sync")
    assert [m for m, _ in conn.sent] == ["agent.session.end", "subscription.ended"]
    assert conn.sent[1][1]["subscription_id"] == sub.id
    assert list(hub.subs) == [other.id]


async def test_hub_mention_targets_follow_group_changes(nursery):
    daemon = FakeDaemon(nursery)
    hub = make_hub(daemon)
    conn = FakeConn()
    daemon.writer.targets["carol"] = ["carol", "tester", "everyone"]
    await hub.subscribe(conn, filter_type="mention", mention="carol")
    first = create(mentions=["qa"])
    await hub.publish([first], "local")
    assert conn.sent == []
    daemon.writer.targets["carol"] = ["carol", "tester", "everyone", "qa"]  # qa now holds role tester
    change = {
        "type": "group.member.add",
        "event_id": ev.new_ulid(),
        "timestamp": ev.now_rfc3339(),
        "v": 1,
        "group": "qa",
        "member_type": "role",
        "member_value": "tester",
        "agent_id": "alice",
    }
    second = create(mentions=["qa"])
    await hub.publish([change, second], "local")
    assert conn.methods() == [("message.create", second["message_id"])]


async def test_hub_inbox_changed_wakes_only_for_what_can_add_to_an_inbox(nursery):
    hub = make_hub(FakeDaemon(nursery))
    before = hub.inbox_changed
    read = {
        "type": "message.read",
        "event_id": ev.new_ulid(),
        "timestamp": ev.now_rfc3339(),
        "v": 1,
        "agent_id": "bob",
        "session_id": "ses_1",
        "message_ids": ["msg_1"],
    }
    await hub.publish([read], "local")
    assert not before.is_set()
    await hub.publish([create()], "local")
    assert before.is_set()
    assert hub.inbox_changed is not before


async def test_hub_the_ring_is_bounded_by_bytes_and_a_resume_past_it_reads_the_log(nursery, tmp_path):
    """The replay ring held 20,000 whole events, each up to 16 MiB from a remote (issue 31,
    finding 9): it is bounded by bytes too, and a resume it no longer reaches reads the log."""
    daemon = FakeDaemon(nursery)
    daemon.config.values = {"subscription_ring_bytes": 45_000}  # three of the events below, not four
    (tmp_path / "log").mkdir()
    daemon.writer.log = event_log = EventLog(tmp_path / "log")
    hub = make_hub(daemon)
    history = [create() for _ in range(20)]
    for d in history:
        d["body"] = {**d["body"], "content": "x" * 10_000}
    event_log.append(history)
    await hub.publish(history, "sync")
    assert len(hub.ring) == 3 and hub.ring.bytes <= 45_000
    conn = FakeConn(paced=True)
    conn.gate.set()
    await hub.subscribe(conn, filter_type="all", since_event_id=history[1]["event_id"])
    await _eventually(lambda: conn.sent and conn.sent[-1][0] == "subscription.replayed")
    assert [p["message_id"] for _, p in conn.sent[:-1]] == [d["message_id"] for d in history[2:]]


# One event as a replica receives it: signed, chained, one mention (a line of the sync benchmark's log).
SIGNED_LINE = (
    b'{"type":"message.create","timestamp":"2026-11-27T15:32:19.387Z","event_id":"01M8ET5MAPZJE9DQ36PF3WB6HS",'
    b'"v":1,"message_id":"msg_01M8ET5MAP05W1V0FT6YJE9WJQ","thread_id":"thr_01M8ET5MAPZJE9DQ36PF3WB6HS",'
    b'"agent_id":"agent_36","session_id":"ses_01M8ET4YYCBESMKSHG4T84B4M0","body":{"format":"markdown",'
    b'"content":"worktree shard query fix notes flaky worktree module review rebuild fix rebuild release merge '
    b'client docs schema budget merge conflict budget shard fetch failing failing remote notes fix ready",'
    b'"structured":""},"scopes":[],"refs":[{"type":"mention","value":"agent_16"}],"priority":"normal",'
    b'"authored_by":"","disclosed":false,"chain":{"seq":7433,"prev":"LsjtYcDKM6cnDskV2BTMVg"},'
    b'"sig":{"by":"agent_36","ed25519":"DVGshe8Xs6ZoFdyePzY5ZH6+XjHkWTrjWSS9McFMYRTnyLFp4AuH9jFCEK1iw9s+'
    b'IpGq4bKV8dUN+icl5UWlBw=="}}'
)


def _held(o, seen: set[int]) -> int:
    """The bytes ``o`` and everything it holds take in this interpreter."""
    if id(o) in seen:
        return 0
    seen.add(id(o))
    size = sys.getsizeof(o)
    if isinstance(o, dict):
        size += sum(_held(k, seen) + _held(v, seen) for k, v in o.items())
    elif isinstance(o, list):
        size += sum(_held(x, seen) for x in o)
    return size


def test_hub_the_rings_byte_bound_counts_what_an_event_really_holds():
    """The ring's byte bound (`subscription_ring_bytes`) is what bounds a daemon's memory
    when events stream in; a weight far under an event's real size (512 bytes were counted
    for ~4 KB) let the ring hold several times its bound."""
    d = ev.decode_line(SIGNED_LINE)
    real = _held(d, set())
    assert 0.75 * real <= replay_ring.weight(d) <= 1.5 * real
