"""Conversations at seconds across machines (issue 30): a replica with recent activity
looks at the remote's tip often and fetches only when it moved; an idle one looks at
the configured interval, and a look that finds nothing runs no cycle.

The pace is the daemon's: these run on daemons in the test's trio run, over the git
store's fake (`memory_machines`; a look is one `GitStore.remote_heads`). How many
requests a turn costs over smart HTTP: tests/sync/test_sync_http.py."""

from __future__ import annotations

from memory_fleet import until
from test_replication_memory import _introduce


async def _contents(machine, agent: str) -> set[str]:
    listed = await machine.rpc("message.list", {"caller": agent, "page_size": 100})
    return {m["body"]["content"] for m in listed["messages"]}


async def _arrives(machine, agent: str, content: str) -> None:
    async def there() -> bool:
        return content in await _contents(machine, agent)

    await until(there, f"{content!r} on {machine.name}", every=0.1)


async def test_a_conversation_crosses_machines_without_waiting_for_the_idle_interval(memory_machines):
    # the idle interval is an hour: only the active pace can carry these messages
    a, b = await memory_machines(2, sync_interval=3600, sync_debounce=0.1, sync_active_interval=0.2)
    await a.agent("alice", "implementer")
    await b.agent("bob", "reviewer")
    await _introduce(a, b)
    # a message sent or received makes a replica active (registrations and receipts do not)
    await a.send("alice", "starting on the parser", "@bob")
    await a.pushed()  # by its own (debounced) cycle: from now on only a look tells A of B's writes
    await b.sync()  # the first message of a conversation reaches an idle replica at its idle pace
    await b.send("bob", "is the parser done?", "@alice")
    await _arrives(a, "alice", "is the parser done?")
    await a.send("alice", "yes, merged", "@bob")
    await _arrives(b, "bob", "yes, merged")
    pace = (await a.rpc("sync.status"))["pace"]
    assert pace["state"] == "active" and pace["tip_checks"] >= 1 and pace["requests_last_hour"] >= pace["tip_checks"]


async def test_an_idle_replica_only_looks_at_the_tip_until_it_moves(memory_machines):
    a, b = await memory_machines(2, sync_interval=0.3, sync_debounce=0.1, sync_active_window=0)
    await a.agent("alice", "implementer")
    await b.agent("bob", "reviewer")
    for m in (a, b):  # the cycles the registrations asked for have run: none is left to come
        await m.pushed()
    await _introduce(a, b)
    first = await a.rpc("sync.status")
    assert first["pace"]["state"] == "idle"

    async def looked_three_times():
        status = await a.rpc("sync.status")
        return status["pace"]["tip_checks"] >= first["pace"]["tip_checks"] + 3 and status

    later = await until(looked_three_times, "three looks at the remote's tip", every=0.1)
    assert later["cycles"] == first["cycles"]  # nothing moved: no fetch, no cycle
    await b.send("bob", "ping", "@alice")
    await _arrives(a, "alice", "ping")
    assert (await a.rpc("sync.status"))["cycles"] > first["cycles"]
