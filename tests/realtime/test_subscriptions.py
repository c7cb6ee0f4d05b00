"""Subscriptions over the WebSocket: each filter delivers exactly the matching
events, per-connection sequence numbers, overflow, resume, many clients."""

from __future__ import annotations

import asyncio
import itertools
import json

import pytest

from realtime_helpers import RpcError, WsClient, is_create_of, small_buffer_socket

_n = itertools.count()


def _uniq(prefix: str) -> str:
    return f"{prefix}{next(_n)}_{id(_n) % 997}"


def _about(notes, types=("message.create", "message.edit", "message.delete")) -> set:
    return {(n["method"], n["params"]["message_id"]) for n in notes if n["method"] in types}


def test_each_filter_type_delivers_exactly_the_matching_events(shared):
    d = shared
    t = _uniq("f")
    alice, bob, carol, dave = f"{t}alice", f"{t}bob", f"{t}carol", f"{t}dave"
    rev, tst = f"{t}rev", f"{t}tst"
    d.register(alice, "implementer")
    d.register(bob, rev)
    d.register(carol, tst)
    d.register(dave, f"{t}ops")
    d.call("group.create", {"caller": alice, "name": f"{t}qa"})
    d.call("group.member.add", {"caller": alice, "group": f"{t}qa", "member": tst, "member_type": "role"})
    d.call("group.create", {"caller": alice, "name": f"{t}leads"})
    d.call("group.member.add", {"caller": alice, "group": f"{t}leads", "member": dave, "member_type": "agent"})
    task = {"type": "task", "value": f"{t}-1"}

    async def go():
        scope_c, role_c, group_c, agent_c, all_c = [await d.ws() for _ in range(5)]
        await scope_c.call("subscribe.create", {"filter_type": "scope", "scope": task})
        await role_c.call("subscribe.create", {"filter_type": "mention", "mention": f"@{rev}"})
        await group_c.call("subscribe.create", {"filter_type": "mention", "mention": carol})  # via role → qa
        await agent_c.call("subscribe.create", {"filter_type": "mention", "mention": dave})  # via agent → leads
        await all_c.call("subscribe.create", {"filter_type": "all"})

        m = {}
        m["scoped"] = d.send(alice, "scoped", scopes=[task])["message_id"]
        m["to_role"] = d.send(alice, "to role", to=[f"@{rev}"])["message_id"]
        m["to_bob"] = d.send(alice, "to bob by name", to=[bob])["message_id"]
        m["to_qa"] = d.send(alice, "to qa group", to=[f"{t}qa"])["message_id"]
        m["to_leads"] = d.send(alice, "to leads group", to=[f"{t}leads"])["message_id"]
        m["other_scope"] = d.send(alice, "elsewhere", scopes=[{"type": "task", "value": f"{t}-2"}])["message_id"]
        d.call("message.edit", {"caller": alice, "message_id": m["scoped"], "content": "scoped, edited"})
        d.call("message.delete", {"caller": alice, "message_id": m["scoped"], "reason": "done"})
        m["end"] = d.send(alice, "end", to=["everyone"], scopes=[task])["message_id"]

        got = {}
        for name, c in (("scope", scope_c), ("role", role_c), ("group", group_c), ("agent", agent_c), ("all", all_c)):
            got[name] = await c.until(is_create_of(m["end"]))
        for c in (scope_c, role_c, group_c, agent_c, all_c):
            await c.close()
        return m, got

    m, got = asyncio.run(go())
    create = lambda k: ("message.create", m[k])  # noqa: E731
    assert _about(got["scope"]) == {
        create("scoped"),
        ("message.edit", m["scoped"]),
        ("message.delete", m["scoped"]),
        create("end"),
    }
    assert _about(got["role"]) == {create("to_role"), create("end")}
    assert _about(got["group"]) == {create("to_qa"), create("end")}
    assert _about(got["agent"]) == {create("to_leads"), create("end")}
    mine = {v for v in m.values()}
    assert {x for x in _about(got["all"]) if x[1] in mine} == {
        *(create(k) for k in m),
        ("message.edit", m["scoped"]),
        ("message.delete", m["scoped"]),
    }
    # agent and session events reach `all` only, never a filtered subscription
    for name in ("scope", "role", "group", "agent"):
        assert not [n for n in got[name] if n["method"].startswith("agent.")], name
    # payloads are the spec's, plus subscription_id and seq
    first = next(n for n in got["scope"] if n["method"] == "message.create")["params"]
    for key in (
        "type",
        "timestamp",
        "event_id",
        "v",
        "message_id",
        "thread_id",
        "agent_id",
        "session_id",
        "body",
        "scopes",
        "refs",
        "subscription_id",
        "seq",
    ):
        assert key in first, key
    assert first["body"]["content"] == "scoped"
    edit = next(n for n in got["scope"] if n["method"] == "message.edit")["params"]
    assert edit["body"]["content"] == "scoped, edited"
    delete = next(n for n in got["scope"] if n["method"] == "message.delete")["params"]
    assert delete["reason"] == "done"


def test_agent_and_session_events_reach_all_subscriptions(fresh):
    d = fresh()

    async def go():
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "all"})
        d.register("zed", "watcher")
        sid = d.call("session.start", {"caller": "zed"})["session_id"]
        d.call("session.end", {"caller": "zed", "session_id": sid})
        d.call("agent.delete", {"name": "zed", "reason": "test"})
        notes = await c.until(lambda n: n["method"] == "agent.cleanup")
        await c.close()
        return notes, sid

    notes, sid = asyncio.run(go())
    methods = [n["method"] for n in notes]
    assert "agent.register" in methods
    start = next(n for n in notes if n["method"] == "agent.session.start" and n["params"]["session_id"] == sid)
    end = next(n for n in notes if n["method"] == "agent.session.end" and n["params"]["session_id"] == sid)
    assert start["params"]["agent_id"] == "zed"
    assert end["params"]["reason"] == "normal"
    assert methods.index("agent.session.start") < methods.index("agent.session.end")


def test_thread_updated_follows_a_message_in_a_thread(shared):
    d = shared
    t = _uniq("th")
    d.register(f"{t}a", "implementer")
    scope = {"type": "thread-test", "value": t}

    async def go():
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "scope", "scope": scope})
        first = d.send(f"{t}a", "first", scopes=[scope])
        d.send(f"{t}a", "second", scopes=[scope], thread_id=first["thread_id"])
        notes = await c.until(lambda n: n["method"] == "thread.updated" and n["params"]["message_count"] == 2)
        await c.close()
        return first, notes

    first, notes = asyncio.run(go())
    upd = notes[-1]["params"]
    assert upd["thread_id"] == first["thread_id"]
    assert upd["last_sender"] == f"{t}a"
    assert "preview" in upd
    assert "unread_count" in upd


def test_subscribe_list_delete_and_bad_params(shared):
    async def go():
        c = await shared.ws()
        try:
            a = await c.call("subscribe.create", {"filter_type": "all"})
            b = await c.call("subscribe.create", {"filter_type": "scope", "scope": "module:x"})
            listed = await c.call("subscribe.list")
            assert {s["subscription_id"] for s in listed["subscriptions"]} == {
                a["subscription_id"],
                b["subscription_id"],
            }
            assert (await c.call("subscribe.delete", {"subscription_id": a["subscription_id"]}))["deleted"]
            listed = await c.call("subscribe.list")
            assert [s["subscription_id"] for s in listed["subscriptions"]] == [b["subscription_id"]]
            for params, field in (
                ({"filter_type": "bogus"}, "filter_type"),
                ({"filter_type": "scope"}, "scope"),
                ({"filter_type": "mention"}, "mention"),
                ({"filter_type": "all", "since_event_id": "nope"}, "since_event_id"),
            ):
                with pytest.raises(RpcError) as info:
                    await c.call("subscribe.create", params)
                assert info.value.code == -32602
                assert field in info.value.error["message"]
            with pytest.raises(RpcError) as info:
                await c.call("subscribe.delete", {"subscription_id": a["subscription_id"]})
            assert info.value.code == -32004 or info.value.error["message"].startswith("subscription")
        finally:
            await c.close()
        # another connection sees none of them
        c2 = await shared.ws()
        assert (await c2.call("subscribe.list"))["subscriptions"] == []
        await c2.close()

    asyncio.run(go())


def test_subscription_ends_with_its_session(shared):
    d = shared
    t = _uniq("se")
    d.register(f"{t}a", "implementer")

    async def go():
        c = await d.ws()
        sub = await c.call("subscribe.create", {"filter_type": "all", "caller": f"{t}a"})
        assert sub["session_id"]
        d.call("session.end", {"caller": f"{t}a", "session_id": sub["session_id"]})
        ended = await c.until(lambda n: n["method"] == "subscription.ended")
        assert ended[-1]["params"]["subscription_id"] == sub["subscription_id"]
        assert (await c.call("subscribe.list"))["subscriptions"] == []
        await c.close()

    asyncio.run(go())


def test_sequence_numbers_strictly_increase_per_connection(shared):
    d = shared
    t = _uniq("sq")
    d.register(f"{t}a", "implementer")
    scope = {"type": "seq", "value": t}

    async def go():
        c1, c2 = await d.ws(), await d.ws()
        await c1.call("subscribe.create", {"filter_type": "scope", "scope": scope})
        await c1.call("subscribe.create", {"filter_type": "all"})  # overlapping: still one notification each
        await c2.call("subscribe.create", {"filter_type": "scope", "scope": scope})
        ids = [d.send(f"{t}a", f"n{i}", scopes=[scope])["message_id"] for i in range(20)]
        n1 = await c1.until(is_create_of(ids[-1]))
        n2 = await c2.until(is_create_of(ids[-1]))
        await c1.close()
        await c2.close()
        return ids, n1, n2

    ids, n1, n2 = asyncio.run(go())
    for notes in (n1, n2):
        seqs = [n["params"]["seq"] for n in notes]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, strictly increasing
        creates = [
            n["params"]["message_id"]
            for n in notes
            if n["method"] == "message.create" and n["params"]["message_id"] in ids
        ]
        assert creates == ids  # once each, in order
    assert n2[0]["params"]["seq"] == 1


def _creates_seen(n_wanted: int):
    """A predicate true once ``n_wanted`` distinct message.create notifications went by."""
    seen: set = set()

    def predicate(n) -> bool:
        if n["method"] == "message.create":
            seen.add(n["params"]["message_id"])
        return len(seen) >= n_wanted

    return predicate


def test_slow_client_overflow_drops_oldest_and_says_how_many(fresh):
    d = fresh({"ws_queue_size": 5})
    d.register("flooder", "implementer")
    scope = {"type": "flood", "value": "1"}
    body = "x" * 8000
    n_msgs = 150

    async def go():
        from websockets.asyncio.client import connect

        # a client that stops reading: tiny TCP receive buffer, at most one frame buffered
        slow_ws = await connect(d.url(), additional_headers=d.auth(), max_queue=1, sock=small_buffer_socket(d.port))
        slow = WsClient(slow_ws, reading=False)
        await slow.ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "subscribe.create",
                    "params": {"filter_type": "scope", "scope": scope},
                }
            )
        )
        assert "result" in json.loads(await slow.ws.recv())
        fast = await d.ws()
        await fast.call("subscribe.create", {"filter_type": "scope", "scope": scope})
        loop = asyncio.get_running_loop()
        ids = await loop.run_in_executor(
            None, lambda: [d.send("flooder", body, scopes=[scope])["message_id"] for _ in range(n_msgs)]
        )
        last = ids[-1]
        # the slow client does not hold up the fast one: it reaches the newest event
        await fast.until(is_create_of(last))
        slow.start_reading()
        slow_notes = await slow.until(is_create_of(last))
        await slow.close()
        await fast.close()
        return last, slow_notes

    last, slow_notes = asyncio.run(go())
    dropped = [n for n in slow_notes if n["method"] == "notification.dropped"]
    assert dropped, "the slow client was never told it lost events"
    lost = sum(n["params"]["dropped"] for n in dropped)
    got = [n for n in slow_notes if n["method"] == "message.create"]
    assert lost > 0
    assert len(got) < n_msgs
    # sequence numbers increase, and after each drop notice resume at the announced next_seq
    seqs = [n["params"]["seq"] for n in slow_notes if n["method"] != "notification.dropped"]
    assert all(a < b for a, b in zip(seqs, seqs[1:]))
    for i, n in enumerate(slow_notes[:-1]):
        if n["method"] == "notification.dropped":
            assert slow_notes[i + 1]["params"]["seq"] == n["params"]["next_seq"]
    gaps = (seqs[0] - 1) + sum(b - a - 1 for a, b in zip(seqs, seqs[1:]))
    assert gaps == lost  # every gap is accounted for
    # drop-oldest: the newest event survived
    assert got[-1]["params"]["message_id"] == last


class _Resumer:
    """An honest client that acts on ``notification.dropped``: it subscribes again from
    the last event it read *before* the notice (``since_event_id``), drops the old
    subscription, and skips events it has already seen (by ``event_id``). The resume
    point stays there until the new subscription's replay is complete; another notice
    meanwhile resubscribes from it again. (Calls are awaited one at a time here, so no
    two resubscriptions are ever in flight.)"""

    def __init__(self, client: WsClient, sub_id: int, cursor: str, params: dict):
        self.client, self.sub_id, self.cursor, self.params = client, sub_id, cursor, params
        self.resuming = False
        self.replayed_subs: set = set()
        self.seen_events: set = set()
        self.creates: dict = {}  # message_id -> times seen (repeated events skipped)
        self.dropped = self.resumes = self.repeats = self.replayed = 0

    async def until_seen(self, wanted: set) -> None:
        while not (wanted <= self.creates.keys() and not self.resuming):
            n = await self.client.note()
            method, p = n["method"], n["params"]
            if method == "notification.dropped":
                self.dropped += p["dropped"]
                self.resuming = True
                self.resumes += 1
                old = self.sub_id
                made = await self.client.call("subscribe.create", {**self.params, "since_event_id": self.cursor})
                self.sub_id = made["subscription_id"]
                await self.client.call("subscribe.delete", {"subscription_id": old})
                if self.sub_id in self.replayed_subs:  # its replay ended before the reply was read
                    self.resuming = False
            elif method == "subscription.replayed":
                self.replayed_subs.add(p["subscription_id"])
                if p["subscription_id"] == self.sub_id:
                    self.resuming = False
            elif method == "message.create":
                if p["event_id"] in self.seen_events:
                    self.repeats += 1
                    continue
                self.seen_events.add(p["event_id"])
                self.creates[p["message_id"]] = self.creates.get(p["message_id"], 0) + 1
                self.replayed += bool(p.get("replay"))
                if not self.resuming and not p.get("replay"):
                    self.cursor = p["event_id"]


def test_a_slow_client_told_of_a_drop_resumes_on_the_same_connection_and_loses_nothing(fresh):
    d = fresh({"ws_queue_size": 5})
    d.register("flooder", "implementer")
    scope = {"type": "flood", "value": "2"}
    params = {"filter_type": "scope", "scope": scope}
    body = "x" * 8000

    async def go():
        from websockets.asyncio.client import connect

        loop = asyncio.get_running_loop()
        slow_ws = await connect(d.url(), additional_headers=d.auth(), max_queue=1, sock=small_buffer_socket(d.port))
        slow = WsClient(slow_ws, reading=False)
        await slow.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1000, "method": "subscribe.create", "params": params}))
        sub_id = json.loads(await slow.ws.recv())["result"]["subscription_id"]
        first = d.send("flooder", "first", scopes=[scope])["message_id"]
        cursor = json.loads(await slow.ws.recv())["params"]["event_id"]  # read: the resume point so far
        # then it stops reading while 150 more arrive (its queue holds 5)
        flood = await loop.run_in_executor(
            None, lambda: [d.send("flooder", body, scopes=[scope])["message_id"] for _ in range(150)]
        )
        slow.start_reading()
        reader = _Resumer(slow, sub_id, cursor, params)
        reader.creates[first] = 1
        reader.seen_events.add(cursor)
        # more keep coming while it catches up and resumes: live events during the replays
        more = loop.run_in_executor(
            None, lambda: [d.send("flooder", f"more {i}", scopes=[scope])["message_id"] for i in range(60)]
        )
        await reader.until_seen(set(flood))
        later = await more
        await reader.until_seen(set(later))
        await slow.close()
        return {first, *flood, *later}, reader

    sent, reader = asyncio.run(go())
    assert reader.dropped > 0 and reader.resumes > 0  # it was told, and acted on it
    assert reader.replayed > 0  # what it lost came back as a replay
    assert set(reader.creates) == sent  # nothing lost ...
    assert set(reader.creates.values()) == {1}  # ... and, skipping repeated events, nothing twice


def test_live_events_held_during_a_slow_replay_are_bounded_and_their_loss_announced(fresh):
    """While a replay waits for a client that does not read, live events for that
    subscription are held back; they are held up to the ring's size, and what falls
    off is announced like any other drop, so the client resumes and loses nothing."""
    d = fresh({"ws_queue_size": 20, "subscription_ring_size": 3})
    d.register("flooder", "implementer")
    scope = {"type": "flood", "value": "held"}
    params = {"filter_type": "scope", "scope": scope}
    body = "x" * 8000

    async def go():
        from websockets.asyncio.client import connect

        c = await d.ws()
        await c.call("subscribe.create", params)
        first_id = d.send("flooder", "first", scopes=[scope])["message_id"]
        cursor = _cursor(await c.until(is_create_of(first_id)))
        await c.close()
        backlog = [d.send("flooder", body, scopes=[scope])["message_id"] for _ in range(60)]
        slow_ws = await connect(d.url(), additional_headers=d.auth(), max_queue=1, sock=small_buffer_socket(d.port))
        slow = WsClient(slow_ws, reading=False)
        since = {**params, "since_event_id": cursor}
        await slow.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1000, "method": "subscribe.create", "params": since}))
        sub_id = json.loads(await slow.ws.recv())["result"]["subscription_id"]
        # the replay of 60 big events stalls on the unread socket; these arrive meanwhile
        live = [d.send("flooder", f"live {i}", scopes=[scope])["message_id"] for i in range(12)]
        slow.start_reading()
        reader = _Resumer(slow, sub_id, cursor, params)
        await reader.until_seen({*backlog, *live})
        await slow.close()
        return {*backlog, *live}, reader

    sent, reader = asyncio.run(go())
    assert reader.dropped >= 12 - 3  # the held events past the ring's size were announced as dropped
    assert reader.resumes > 0
    assert set(reader.creates) == sent  # and the resume brought every one of them
    assert set(reader.creates.values()) == {1}


def test_many_concurrent_clients_each_get_every_matching_event(shared):
    d = shared
    t = _uniq("mc")
    d.register(f"{t}a", "implementer")
    scope = {"type": "many", "value": t}
    n_clients = 50

    async def go():
        clients = await asyncio.gather(*[d.ws() for _ in range(n_clients)])
        await asyncio.gather(*[c.call("subscribe.create", {"filter_type": "scope", "scope": scope}) for c in clients])
        ids = [d.send(f"{t}a", f"m{i}", scopes=[scope])["message_id"] for i in range(5)]
        # every client can still make calls while notifications flow
        await asyncio.gather(*[c.call("health") for c in clients])
        results = await asyncio.gather(*[c.until(is_create_of(ids[-1])) for c in clients])
        await asyncio.gather(*[c.close() for c in clients])
        return ids, results

    ids, results = asyncio.run(go())
    for notes in results:
        assert [n["params"]["message_id"] for n in notes if n["method"] == "message.create"] == ids


def _cursor(notes) -> str | None:
    """The event_id to resume from: the last persisted event received (thread.updated is a live summary)."""
    ids = [
        n["params"]["event_id"]
        for n in notes
        if n["method"] not in ("thread.updated", "notification.dropped") and "event_id" in n.get("params", {})
    ]
    return ids[-1] if ids else None


def test_resume_with_since_event_id_while_messages_keep_coming(shared):
    d = shared
    t = _uniq("rs")
    d.register(f"{t}a", "implementer")
    scope = {"type": "resume", "value": t}
    total = 40

    async def go():
        loop = asyncio.get_running_loop()
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "scope", "scope": scope})
        sender = loop.run_in_executor(
            None, lambda: [d.send(f"{t}a", f"r{i}", scopes=[scope])["message_id"] for i in range(total)]
        )
        before = await c.until(_creates_seen(10))  # read some, then drop the connection mid-stream
        await c.close()
        c2 = await d.ws()
        sub = await c2.call(
            "subscribe.create", {"filter_type": "scope", "scope": scope, "since_event_id": _cursor(before)}
        )
        ids = await sender
        after = await c2.until(is_create_of(ids[-1]))
        await c2.close()
        return ids, before, after, sub

    ids, before, after, sub = asyncio.run(go())
    first = [n["params"]["message_id"] for n in before if n["method"] == "message.create"]
    second = [n["params"]["message_id"] for n in after if n["method"] == "message.create"]
    assert first + second == ids  # nothing lost, nothing twice, in order
    replayed = [n for n in after if n["method"] == "message.create" and n["params"].get("replay")]
    marker = [n for n in after if n["method"] == "subscription.replayed"]
    assert len(marker) == 1
    assert marker[0]["params"]["subscription_id"] == sub["subscription_id"]
    assert marker[0]["params"]["replayed"] == len(replayed)
    flags = [
        bool(n["params"].get("replay")) for n in after[: after.index(marker[0])] if n["method"] == "message.create"
    ]
    assert flags == sorted(flags, reverse=True)  # replayed first, then live ones held back meanwhile
    assert not any(
        n["params"].get("replay")
        for n in after[after.index(marker[0]) :]
        if "params" in n and n["method"] == "message.create"
    )


def test_resume_from_beyond_the_ring_reads_the_log(fresh):
    d = fresh({"subscription_ring_size": 3})
    d.register("lena", "implementer")
    scope = {"type": "ring", "value": "1"}

    async def go():
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "scope", "scope": scope})
        ids = [d.send("lena", f"a{i}", scopes=[scope])["message_id"] for i in range(2)]
        cursor = _cursor(await c.until(is_create_of(ids[-1])))
        await c.close()
        later = [d.send("lena", f"b{i}", scopes=[scope])["message_id"] for i in range(6)]  # pushes cursor out
        d.call("message.edit", {"caller": "lena", "message_id": ids[0], "content": "edited later"})
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "scope", "scope": scope, "since_event_id": cursor})
        notes = await c.until(lambda n: n["method"] == "subscription.replayed")
        live = d.send("lena", "live", scopes=[scope])["message_id"]
        notes += await c.until(is_create_of(live))
        await c.close()
        return ids, later, live, notes

    ids, later, live, notes = asyncio.run(go())
    assert [(n["method"], n["params"]["message_id"]) for n in notes if n["method"].startswith("message.")] == [
        ("message.create", m) for m in later
    ] + [("message.edit", ids[0]), ("message.create", live)]


def test_resume_after_a_daemon_restart_reads_the_log(fresh):
    d = fresh()
    d.register("rita", "implementer")
    scope = {"type": "restart", "value": "1"}

    async def first_half():
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "scope", "scope": scope})
        ids = [d.send("rita", f"a{i}", scopes=[scope])["message_id"] for i in range(3)]
        notes = await c.until(is_create_of(ids[-1]))
        await c.close()
        return ids, _cursor(notes)

    ids, cursor = asyncio.run(first_half())
    d.stop()  # the ring is gone with the process
    d.start()
    later = [d.send("rita", f"b{i}", scopes=[scope])["message_id"] for i in range(3)]

    async def second_half():
        c = await d.ws()
        await c.call("subscribe.create", {"filter_type": "scope", "scope": scope, "since_event_id": cursor})
        notes = await c.until(lambda n: n["method"] == "subscription.replayed")
        live = d.send("rita", "live", scopes=[scope])["message_id"]
        notes += await c.until(is_create_of(live))
        await c.close()
        return notes, live

    notes, live = asyncio.run(second_half())
    creates = [n["params"]["message_id"] for n in notes if n["method"] == "message.create"]
    assert creates == later + [live]
