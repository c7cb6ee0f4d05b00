"""What the daemons' sync cycles decide, across machines: appends to one stream on two
machines, edits, deletes and receipts, random interleavings, an idle daemon.

A repository and a transport add nothing to these: the daemons run in the test's trio
run and sync through one remote in memory (`memory_fleet`). The same paths over real
repositories and every transport: test_replication.py.
"""

from __future__ import annotations

import random

from replication_helpers import event_ids


async def _introduce(a, b):
    """Sync both ways so each machine knows the other's agents."""
    await a.sync()
    await b.sync()
    await a.sync()


def _assert_linear_single_root(machine) -> None:
    commits = machine.history()
    assert all(len(c.parents) <= 1 for c in commits), "a-sync history must stay linear"
    assert sum(1 for c in commits if not c.parents) == 1


async def test_concurrent_appends_to_the_same_stream_converge_byte_identical(memory_machines):
    a, b = await memory_machines(2)
    # One agent on two machines (its identity and key copied over): both append to
    # messages/alice/, roll over to new segments on their own, and converge.
    await a.agent("alice", "implementer")
    b.adopt_identity(a, "alice")
    await b.agent("alice", "implementer")
    ids = []
    for i in range(120):  # ~250 bytes each: more than one 64 KiB segment in all
        ids.append(
            (await a.rpc("message.send", {"caller": "alice", "content": f"from a {i} " + "x" * 150}))["message_id"]
        )
        ids.append(
            (await b.rpc("message.send", {"caller": "alice", "content": f"from b {i} " + "y" * 150}))["message_id"]
        )
        if i == 60:
            await a.sync()  # A's first segment reaches the remote mid-way
    await a.sync()
    await b.sync()
    await a.sync()
    sa, sb = a.shards(), b.shards()
    assert sa == sb
    segments = sorted(p for p in sa if p.startswith("messages/alice/"))
    assert len(segments) >= 2
    eids = [e for p in segments for e in event_ids(sa[p]) if not e.startswith("<")]
    messages = [
        e for p in segments for line in sa[p].splitlines() if b'"message.create"' in line for e in event_ids(line)
    ]
    assert len(eids) == len(set(eids))
    assert len(messages) == 240
    for p in segments:
        assert b"<<<<<<<" not in sa[p]
        assert b">>>>>>>" not in sa[p]
    for m in (a, b):
        listed = [
            x["message_id"]
            for page in (1, 2, 3)
            for x in (await m.rpc("message.list", {"page_size": 100, "page": page}))["messages"]
        ]
        assert sorted(listed) == sorted(ids)
        _assert_linear_single_root(m)


async def test_edits_deletes_and_receipts_replicate(memory_machines):
    a, b = await memory_machines(2)
    await a.agent("alice", "implementer")
    await b.agent("bob", "reviewer")
    await _introduce(a, b)
    m1 = (await a.rpc("message.send", {"caller": "alice", "content": "v1", "to": ["bob"]}))["message_id"]
    m2 = (await a.rpc("message.send", {"caller": "alice", "content": "doomed", "to": ["bob"]}))["message_id"]
    await a.sync()
    await b.sync()
    await b.rpc("message.markRead", {"caller": "bob", "message_ids": [m1]})
    await a.rpc("message.edit", {"caller": "alice", "message_id": m1, "content": "v2"})
    await a.rpc("message.delete", {"caller": "alice", "message_id": m2})
    await _introduce(a, b)
    got = (await b.rpc("message.get", {"message_id": m1}))["message"]
    assert got["body"]["content"] == "v2"
    assert got["version"] == 1
    assert (await b.rpc("message.get", {"message_id": m2}))["message"]["deleted"] is True
    on_a = (await a.rpc("message.get", {"message_id": m1}))["message"]
    assert "bob" in on_a["read_by"]


async def test_randomised_replicas_converge_to_identical_logs_and_inboxes(memory_machines):
    rng = random.Random(20261125)
    reps = await memory_machines(4)
    agents = {m.name: f"agent_{m.name}" for m in reps}
    for m in reps:
        await m.agent(agents[m.name], "worker")
    await reps[1].agent("shared", "worker")  # one agent living on two machines (same key): same shards on both
    reps[3].adopt_identity(reps[1], "shared")
    await reps[3].agent("shared", "worker")
    local_agents = {m.name: [agents[m.name]] + (["shared"] if m in (reps[1], reps[3]) else []) for m in reps}
    for m in reps:
        await m.sync()
    for _ in range(60):
        m = rng.choice(reps)
        who = rng.choice(local_agents[m.name])
        op = rng.random()
        if op < 0.45:
            await m.rpc(
                "message.send",
                {
                    "caller": who,
                    "content": f"msg {rng.random():.6f}",
                    "to": ["@everyone"],
                    "scopes": [{"type": "topic", "value": rng.choice("xyz")}],
                },
            )
        elif op < 0.6:
            mine = (await m.rpc("message.list", {"author_id": who, "page_size": 100}))["messages"]
            if mine:
                await m.rpc(
                    "message.edit",
                    {
                        "caller": who,
                        "message_id": rng.choice(mine)["message_id"],
                        "content": f"edited {rng.random():.6f}",
                    },
                )
        elif op < 0.8:
            others = (await m.rpc("message.list", {"caller": who, "exclude_own": True, "page_size": 100}))["messages"]
            if others:
                pick = [x["message_id"] for x in rng.sample(others, min(3, len(others)))]
                method = "message.markRead" if rng.random() < 0.8 else "message.markUnread"
                await m.rpc(method, {"caller": who, "message_ids": pick})
        else:
            await m.sync()
    for _ in range(2):
        for m in reps:
            await m.sync()
    shards = [m.shards() for m in reps]
    assert all(s == shards[0] for s in shards[1:])
    everyone = sorted({a for names in local_agents.values() for a in names})
    for who in everyone:
        views = [await m.rpc("message.list", {"caller": who, "page_size": 100}) for m in reps]
        assert all(v == views[0] for v in views[1:]), who
    unread = {"caller": "shared", "exclude_own": True, "unread": True, "page_size": 100, "sort_by": "created_at"}
    inboxes = [await m.rpc("message.list", {**unread, "sort_order": "desc"}) for m in (reps[1], reps[3])]
    assert inboxes[0] == inboxes[1]
    for m in reps:
        _assert_linear_single_root(m)


async def test_idle_daemon_makes_no_commits(memory_machines):
    (a,) = await memory_machines(1)
    await a.agent("alice", "implementer")
    await a.rpc("message.send", {"caller": "alice", "content": "one"})
    first = await a.sync()
    assert first["commits"] >= 1
    tip = a.history()[0].id
    again = await a.sync()
    assert again["commits"] == 0
    assert again["ok"]
    assert a.history()[0].id == tip == memory_machines.remote.ref("refs/heads/a-sync")
