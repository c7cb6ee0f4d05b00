"""wait_for_message: push wake-ups, the queue, one wait at a time, priority filters,
cancellation, daemon restarts, messages from another machine; two agents talking
through their own servers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio

from fixtures.repos.builders import make_replicas
from mcp_types import CancelledNotification, CancelledNotificationParams

from mcp_helpers import WAIT, cli_send, mcp_server, start_daemon, tapped_mcp_server


async def test_two_agents_exchange_messages_through_their_own_servers(bus):
    bus.register("ex_ann", "ex_impl", identity_file=True)
    bus.register("ex_ben", "ex_rev", identity_file=True)
    async with mcp_server(bus.repo, "ex_ann") as ann, mcp_server(bus.repo, "ex_ben") as ben:
        sent = await ann.call("send_message", {"to": "@ex_ben", "content": "please review #12"})
        assert sent["recipient_status"] == "active"  # ben's server is running: he was seen just now
        got = await ben.call("check_messages")
        assert [(m["from"], m["content"]) for m in got["messages"]] == [("ex_ann", "please review #12")]
        reply = await ben.call("send_message", {"to": "ex_ann", "content": "LGTM", "reply_to": sent["message_id"]})
        assert reply["thread_id"] == sent["thread_id"]
        waited = await ann.call("wait_for_message", {"timeout": 10})
        assert waited["status"] == "message_received"
        message = waited["message"]
        assert (message["from"], message["content"], message["reply_to"]) == ("ex_ben", "LGTM", sent["message_id"])
        assert message["thread_id"] == sent["thread_id"]
        # consumed: marked read, so neither tool hands it out again
        assert (await ann.call("check_messages"))["status"] == "empty"
        assert (await ann.call("wait_for_message", {"timeout": 0}))["status"] == "timeout"


async def test_wait_is_woken_by_a_cli_send(bus):
    bus.register("wk_cli", "wk_role", identity_file=True)
    bus.register("wk_sender", "wk_other", identity_file=True)
    async with mcp_server(bus.repo, "wk_cli") as server:
        result = {}

        async def waiter():
            result["r"] = await server.call("wait_for_message", {"timeout": 30})

        async with trio.open_nursery() as nursery:
            blocked = server.blocked_waits()
            nursery.start_soon(waiter)
            await server.until_blocked(blocked)  # the test is about the wake-up, not the queue
            mid = await trio.to_thread.run_sync(cli_send, bus.repo, "wk_sender", "wake up", "--to", "@wk_cli")
        assert result["r"]["message"]["message_id"] == mid


async def test_wait_is_woken_by_another_mcp_server_and_times_out_when_nothing_comes(bus):
    bus.register("wk_a", "wk_ra", identity_file=True)
    bus.register("wk_b", "wk_rb", identity_file=True)
    async with mcp_server(bus.repo, "wk_a") as a, mcp_server(bus.repo, "wk_b") as b:
        timed_out = await a.call("wait_for_message", {"timeout": 1})
        assert (timed_out["status"], timed_out["message"]) == ("timeout", None)
        assert timed_out["waited_seconds"] in (1, 2)  # whole seconds; a busy machine may wake it late

        result = {}

        async def waiter():
            result["r"] = await a.call("wait_for_message", {"timeout": 30})

        async with trio.open_nursery() as nursery:
            blocked = a.blocked_waits()
            nursery.start_soon(waiter)
            await a.until_blocked(blocked)
            sent = await b.call("send_message", {"to": "@wk_ra", "content": "role mention", "priority": "high"})
        message = result["r"]["message"]
        assert (message["message_id"], message["from"], message["priority"], message["to"]) == (
            sent["message_id"],
            "wk_b",
            "high",
            ["@wk_ra"],
        )


async def test_queue_drains_first_and_a_second_concurrent_wait_is_refused(bus):
    bus.register("q_me", "q_role", identity_file=True)
    bus.register("q_you", "q_other", identity_file=True)
    async with mcp_server(bus.repo, "q_me") as me:
        first = bus.send("q_you", "one", to=["q_me"])["message_id"]
        second = bus.send("q_you", "two", to=["everyone"])["message_id"]
        bus.send("q_me", "my own, to everyone", to=["everyone"])  # never handed to myself
        got = [(await me.call("wait_for_message", {"timeout": 5}))["message"]["message_id"] for _ in range(2)]
        assert got == [first, second]  # arrived while no wait ran: queued, oldest first
        assert (await me.call("wait_for_message", {"timeout": 0}))["status"] == "timeout"

        async with trio.open_nursery() as nursery:
            done = trio.Event()

            async def long_wait():
                await me.call("wait_for_message", {"timeout": 30})
                done.set()

            blocked = me.blocked_waits()
            nursery.start_soon(long_wait)
            await me.until_blocked(blocked)
            error = await me.fail("wait_for_message", {"timeout": 1})
            assert "already running" in error
            bus.send("q_you", "ends the first wait", to=["q_me"])
            with trio.fail_after(WAIT):
                await done.wait()


async def test_priority_filter_leaves_other_messages_queued(bus):
    bus.register("pf_me", "pf_role", identity_file=True)
    bus.register("pf_you", "pf_other", identity_file=True)
    async with mcp_server(bus.repo, "pf_me") as me:
        low = bus.send("pf_you", "low", to=["pf_me"], priority="low")["message_id"]
        normal = bus.send("pf_you", "normal", to=["pf_me"])["message_id"]
        high = bus.send("pf_you", "high", to=["pf_me"], priority="high")["message_id"]
        critical = bus.send("pf_you", "critical", to=["pf_me"], priority="critical")["message_id"]

        async def take(flt: str, seconds: int = 5):
            r = await me.call("wait_for_message", {"timeout": seconds, "priority_filter": flt})
            return r["message"]["message_id"] if r["message"] else None

        assert await take("critical") == critical
        assert await take("high_and_above") == high
        assert await take("critical", seconds=0) is None
        assert await take("normal_and_above") == normal
        assert await take("normal_and_above", seconds=0) is None
        assert await take("all") == low

        # a filtered wait is not woken by what it filters out, and is by what it wants
        result = {}

        async def waiter():
            result["r"] = await me.call("wait_for_message", {"timeout": 30, "priority_filter": "critical"})

        async with trio.open_nursery() as nursery:
            blocked = me.blocked_waits()
            nursery.start_soon(waiter)
            await me.until_blocked(blocked)
            skipped = bus.send("pf_you", "just normal", to=["pf_me"])["message_id"]
            await me.until_blocked(blocked + 1)  # it looked at the normal one and waits on
            assert "r" not in result
            wanted = bus.send("pf_you", "fire!", to=["pf_me"], priority="critical")["message_id"]
        assert result["r"]["message"]["message_id"] == wanted
        assert await take("all") == skipped


async def test_a_cancelled_wait_ends_cleanly_and_loses_no_message(bus):
    bus.register("cx_me", "cx_role", identity_file=True)
    bus.register("cx_you", "cx_other", identity_file=True)
    async with mcp_server(bus.repo, "cx_me") as me:
        with trio.move_on_after(0.5) as scope:
            await me.session.call_tool("wait_for_message", {"timeout": 30})
        assert scope.cancelled_caught
        await me.call("list_groups")  # a round trip: the server has seen the cancellation
        mid = bus.send("cx_you", "after the cancel", to=["cx_me"])["message_id"]
        # the cancelled wait did not take it: it is still unread, and the next wait gets it
        assert bus.call("message.get", {"message_id": mid, "caller": "cx_me"})["message"]["is_read"] is False
        got = await me.call("wait_for_message", {"timeout": 5})
        assert got["message"]["message_id"] == mid


async def test_a_cancel_that_crosses_the_answer_leaves_the_message_unread(bus):
    """The client gives up on a wait just as the server answers it: the cancel reaches the
    server after the answer was written, and the client drops the answer. The message the
    wait claimed must come back (unread, and first in the queue), not be lost."""
    bus.register("lc_me", "lc_role", identity_file=True)
    bus.register("lc_you", "lc_other", identity_file=True)
    async with tapped_mcp_server(bus.repo, "lc_me") as (me, tap):
        mid = bus.send("lc_you", "do not lose me", to=["lc_me"])["message_id"]
        tap.hold_answer_to_next("tools/call", "wait_for_message")
        with trio.CancelScope() as scope:

            async def cancel_once_answered():
                await tap.held.wait()  # the server has answered (and claimed the message)
                scope.cancel()  # the SDK sends notifications/cancelled for the request

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_once_answered)
                await me.session.call_tool("wait_for_message", {"timeout": 30})
        assert scope.cancelled_caught
        tap.release()  # the answer reaches the client, which has stopped waiting for it
        got = await me.call("wait_for_message", {"timeout": 10})
        assert (got["status"], got["message"]["message_id"]) == ("message_received", mid)
        assert bus.call("message.get", {"message_id": mid, "caller": "lc_me"})["message"]["is_read"] is True


async def test_a_cancel_for_a_wait_already_answered_puts_its_message_back(bus):
    """The same race driven at the protocol level: notifications/cancelled for the id of a
    wait_for_message whose answer the client has already received."""
    bus.register("la_me", "la_role", identity_file=True)
    bus.register("la_you", "la_other", identity_file=True)
    async with tapped_mcp_server(bus.repo, "la_me") as (me, tap):
        mid = bus.send("la_you", "claimed, then cancelled", to=["la_me"])["message_id"]
        first = await me.call("wait_for_message", {"timeout": 10})
        assert first["message"]["message_id"] == mid
        answered = tap.request_id("tools/call", "wait_for_message")
        await me.session.send_notification(
            CancelledNotification(params=CancelledNotificationParams(request_id=answered, reason="gave up"))
        )
        again = await me.call("wait_for_message", {"timeout": 10})
        assert (again["status"], again["message"]["message_id"]) == ("message_received", mid)
        # a cancel for an id that was never a wait changes nothing
        await me.session.send_notification(
            CancelledNotification(params=CancelledNotificationParams(request_id=987654, reason="unknown"))
        )
        checked = await me.call("check_messages")
        assert mid not in [m["message_id"] for m in checked["messages"]]


async def test_a_new_session_of_the_same_agent_does_not_silence_the_waiter(bus):
    bus.register("ss_me", "ss_role", identity_file=True)
    bus.register("ss_you", "ss_other", identity_file=True)
    async with mcp_server(bus.repo, "ss_me") as me:
        await me.call("list_groups")
        # the agent also uses the CLI: a new session ends the one the subscription was bound to
        bus.call("session.start", {"caller": "ss_me"})
        mid = bus.send("ss_you", "still there?", to=["ss_me"])["message_id"]
        got = await me.call("wait_for_message", {"timeout": 10})
        assert got["message"]["message_id"] == mid


def _server_pids(repo: Path, agent: str) -> list[int]:
    """The `thrum mcp serve` processes serving ``agent`` in ``repo`` (from their command lines)."""
    want = ["mcp", "serve", "--repo", str(repo), "--agent-id", agent]
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # not a process, or it ended
            continue
        if any(argv[i : i + len(want)] == want for i in range(len(argv))):
            pids.append(int(entry.name))
    return pids


async def test_a_message_written_before_the_waiter_subscribes_again_is_not_missed(bus):
    """The subscription's session ends (a new one, from the CLI) and a message is written
    before the server has subscribed again (held still here: a loaded machine): with no
    event seen yet there is no point to resume from, so it finds the message in the inbox."""
    bus.register("sx_me", "sx_role", identity_file=True)
    bus.register("sx_you", "sx_other", identity_file=True)
    async with mcp_server(bus.repo, "sx_me") as me:
        await me.call("list_groups")
        [pid] = _server_pids(bus.repo, "sx_me")
        os.kill(pid, signal.SIGSTOP)
        try:
            bus.call("session.start", {"caller": "sx_me"})  # ends the session the subscription was bound to
            mid = bus.send("sx_you", "written meanwhile", to=["sx_me"])["message_id"]
        finally:
            os.kill(pid, signal.SIGCONT)
        got = await me.call("wait_for_message", {"timeout": 10})
        assert got["message"] is not None and got["message"]["message_id"] == mid, got


async def test_a_daemon_restart_during_a_wait_is_survived_without_loss_or_duplicates(fresh):
    d = fresh()
    d.register("rs_me", "rs_role", identity_file=True)
    d.register("rs_you", "rs_other", identity_file=True)
    async with mcp_server(d.repo, "rs_me") as me:
        before = d.send("rs_you", "before the restart", to=["rs_me"])["message_id"]
        assert (await me.call("wait_for_message", {"timeout": 5}))["message"]["message_id"] == before
        result = {}

        async def waiter():
            result["r"] = await me.call("wait_for_message", {"timeout": 60})

        async with trio.open_nursery() as nursery:
            blocked = me.blocked_waits()
            nursery.start_soon(waiter)
            await me.until_blocked(blocked)
            await trio.to_thread.run_sync(d.stop)
            await trio.to_thread.run_sync(d.start)
            # sent before the server has reconnected (it backs off while the daemon is down)
            during = d.send("rs_you", "right after the restart", to=["rs_me"])["message_id"]
        assert result["r"]["message"]["message_id"] == during
        after = d.send("rs_you", "after", to=["rs_me"])["message_id"]
        assert (await me.call("wait_for_message", {"timeout": 10}))["message"]["message_id"] == after
        assert (await me.call("wait_for_message", {"timeout": 0}))["status"] == "timeout"  # no duplicate queued
        assert (await me.call("check_messages"))["status"] == "empty"


async def test_a_message_synced_from_another_machine_wakes_the_waiter(tmp_path):
    syncing = {"local_only": False, "sync_interval": 3600, "sync_debounce": 3600}
    pair = make_replicas(tmp_path, 2)
    a = start_daemon(tmp_path / "a", syncing, repo=pair.a)
    b = start_daemon(tmp_path / "b", syncing, repo=pair.b)
    try:
        a.register("far_ann", "far_impl")
        b.register("near_bea", "near_rev", identity_file=True)
        b.call("sync.run", timeout=60)
        a.call("sync.run", timeout=60)  # machine A now knows @near_bea
        async with mcp_server(b.repo, "near_bea") as bea:
            result = {}

            async def waiter():
                result["r"] = await bea.call("wait_for_message", {"timeout": 60})

            async with trio.open_nursery() as nursery:
                blocked = bea.blocked_waits()
                nursery.start_soon(waiter)
                await bea.until_blocked(blocked)
                sent = a.send("far_ann", "hello from machine A", to=["near_bea"])
                await trio.to_thread.run_sync(lambda: a.call("sync.run", timeout=60))
                await trio.to_thread.run_sync(lambda: b.call("sync.run", timeout=60))
            message = result["r"]["message"]
            assert (message["message_id"], message["from"], message["content"]) == (
                sent["message_id"],
                "far_ann",
                "hello from machine A",
            )

            # A message written on A *before* one B's waiter has already seen, arriving by a sync
            # while B's daemon restarts: the resume point is newer than it, the inbox check finds it.
            b.register("near_cat", "near_ops")  # before: a new name's registration fetches first
            older = a.send("far_ann", "older, synced late", to=["near_bea"])["message_id"]
            a.call("sync.run", timeout=60)
            newer = b.send("near_cat", "newer, local", to=["near_bea"])["message_id"]
            assert (await bea.call("wait_for_message", {"timeout": 10}))["message"]["message_id"] == newer
            await trio.to_thread.run_sync(b.stop)
            await trio.to_thread.run_sync(b.start)
            await trio.to_thread.run_sync(lambda: b.call("sync.run", timeout=60))
            assert (await bea.call("wait_for_message", {"timeout": 20}))["message"]["message_id"] == older
            assert (await bea.call("wait_for_message", {"timeout": 0}))["status"] == "timeout"
            assert (await bea.call("check_messages"))["status"] == "empty"
    finally:
        a.stop()
        b.stop()
