"""A hook's one call (``message.pending`` with ``surface_via``), against a daemon in this trio run.

What a hook relies on: the framed text of what waits, the messages shown in full
recorded as surfaced together with their delivered receipts in one durable write
(one batch through the writer), nothing written when nothing is new, and a stop
(``urgent_only``) that records nothing unless something must not wait.
"""

from __future__ import annotations

import trio
import trio.testing

from fixtures.inprocess import rpc, running_daemon

VIA = "hook claude UserPromptSubmit"


async def _batches(daemon):
    """The batches the writer makes durable from now on: a list of their event types.

    bob has a session already (his first write of a daemon's life would start one).
    """
    await rpc(daemon, "message.send", {"caller": "bob", "content": "here", "to": ["@alice"]})
    await trio.testing.wait_all_tasks_blocked()
    seen: list[list[str]] = []
    daemon.writer.subscribe(lambda applied, source: seen.append([d["type"] for d in applied]))
    return seen


async def test_a_hook_call_frames_what_waits_and_records_it_in_one_write(tmp_path):
    async with trio.open_nursery() as nursery:
        daemon = await running_daemon(tmp_path, nursery)
        sent = [
            (await rpc(daemon, "message.send", {"caller": "alice", "content": f"note {i}", "to": ["@reviewer"]}))[
                "message_id"
            ]
            for i in range(3)
        ]
        batches = await _batches(daemon)
        got = await rpc(daemon, "message.pending", {"caller": "bob", "surface_via": VIA})
        assert got["shown"] == sent and got["total"] == 3 and got["urgent"] is False
        assert "│ note 0" in got["text"] and "<thrum-messages" in got["text"]
        await trio.testing.wait_all_tasks_blocked()
        assert len(batches) == 1 and set(batches[0]) == {"message.delivered", "message.surfaced"}  # one write
        state = await rpc(daemon, "message.get", {"caller": "alice", "message_id": sent[0]})
        assert [(r["agent"], r["state"]) for r in state["message"]["delivery"]] == [("bob", "surfaced")]
        again = await rpc(daemon, "message.pending", {"caller": "bob", "surface_via": VIA})
        assert (again["text"], again["shown"], again["total"]) == ("", [], 0)  # shown once
        await trio.testing.wait_all_tasks_blocked()
        assert len(batches) == 1  # nothing new: nothing written
        daemon.request_shutdown()


async def test_a_stop_records_nothing_unless_something_must_not_wait(tmp_path):
    async with trio.open_nursery() as nursery:
        daemon = await running_daemon(tmp_path, nursery)
        calm = (await rpc(daemon, "message.send", {"caller": "alice", "content": "fyi", "to": ["@reviewer"]}))[
            "message_id"
        ]
        stop = {"caller": "bob", "surface_via": "hook claude Stop", "urgent_only": True}
        got = await rpc(daemon, "message.pending", stop)
        assert (got["text"], got["shown"], got["total"], got["urgent"]) == ("", [], 1, False)
        urgent = await rpc(
            daemon, "message.send", {"caller": "alice", "content": "now", "to": ["@bob"], "priority": "high"}
        )
        got = await rpc(daemon, "message.pending", stop)
        assert got["urgent"] is True and got["shown"] == [calm, urgent["message_id"]]  # the frame holds both
        daemon.request_shutdown()
