"""A connection's outbox over a real socket pair: pacing replays never loses a wake-up."""

from __future__ import annotations

import json

import trio
import trio.testing

from thrum.daemon.connection import Connection


async def test_every_replay_waiting_for_room_is_woken_when_the_client_reads(nursery):
    """Several subscriptions of one connection replay at once (a client resuming again
    before its previous resume answered). Each waits for room in the outbox; once the
    client reads, every one of them must go on, not only the last to start waiting."""
    ours, theirs = trio.socket.socketpair()
    stream, client = trio.SocketStream(ours), trio.SocketStream(theirs)
    conn = Connection("test", stream.send_all, queue_size=4)
    for i in range(4):
        conn.notify("message.create", {"n": i})
    resumed: list[int] = []

    async def replay(i: int) -> None:
        await conn.wait_for_room()
        resumed.append(i)

    for i in range(3):
        nursery.start_soon(replay, i)
    await trio.testing.wait_all_tasks_blocked()
    assert resumed == []  # the outbox is full: every replay waits

    nursery.start_soon(conn.run_outbox)
    received = b""
    with trio.fail_after(5):
        while received.count(b"\n") < 4:
            received += await client.receive_some()
    await trio.testing.wait_all_tasks_blocked()
    assert sorted(resumed) == [0, 1, 2]
    assert [json.loads(line)["params"]["n"] for line in received.splitlines()] == [0, 1, 2, 3]
    conn.close()
