"""Deadlines in the daemon on trio's clock: waits tested without waiting.

The daemon runs inside the test's own trio run (real SQLite, log and git work in
worker threads, as always), on a mock clock:

- `autojump_clock`: time moves only when every task is blocked, straight to the
  next deadline, so a 30-second long poll times out at once and at its deadline;
- `mock_clock` (time stands still): a long poll that returns can only have been
  woken by what happened, never by its deadline.
"""

from __future__ import annotations

import trio
import trio.testing

from fixtures.inprocess import rpc, running_daemon


async def test_message_wait_times_out_at_its_deadline(autojump_clock, tmp_path):
    async with trio.open_nursery() as nursery:
        daemon = await running_daemon(tmp_path, nursery)
        started = trio.current_time()
        result = await rpc(daemon, "message.wait", {"caller": "bob", "timeout": 30})
        assert result == {"messages": [], "timed_out": True}
        assert trio.current_time() - started >= 30
        daemon.request_shutdown()


async def test_message_wait_wakes_when_a_message_arrives(mock_clock, tmp_path):
    async with trio.open_nursery() as nursery:
        daemon = await running_daemon(tmp_path, nursery)
        started = trio.current_time()
        got = trio.Event()
        result: dict = {}

        async def wait() -> None:
            result.update(await rpc(daemon, "message.wait", {"caller": "bob", "timeout": 600}))
            got.set()

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert not got.is_set()
        sent = await rpc(daemon, "message.send", {"caller": "alice", "content": "hi", "to": ["@bob"]})
        await got.wait()
        assert result["timed_out"] is False
        assert [m["message_id"] for m in result["messages"]] == [sent["message_id"]]
        assert trio.current_time() == started  # the clock never moved: the message woke it
        daemon.request_shutdown()
