"""thrum.client_async: concurrent requests, notifications, typed errors, connection loss,
autostart and reconnection, against real daemons over the Unix socket (trio and asyncio)."""

from __future__ import annotations

import os
import signal

import anyio
import pytest
import trio

from realtime_helpers import WAIT, daemon_env
from thrum import client_async
from thrum.errors import MethodNotFound, Unavailable, UnknownRecipient


async def test_requests_run_concurrently_and_notifications_arrive_in_order(fresh):
    shared = fresh()  # its own daemon: the session's shared one may hold @everyone mail from other files
    shared.register("ca_me", "ca_role")
    shared.register("ca_you", "ca_other")
    notes = []
    got_three = trio.Event()

    def on_note(method, params):
        if method == "message.create":
            notes.append((params["seq"], params["body"]["content"]))
            if len(notes) == 3:
                got_three.set()

    with trio.fail_after(WAIT):
        async with client_async.open_client(shared.paths, on_notification=on_note) as client:
            await client.call("subscribe.create", {"filter_type": "mention", "mention": "ca_me"})
            async with trio.open_nursery() as nursery:
                waited = {}

                async def long_wait():
                    waited["r"] = await client.call("message.wait", {"caller": "ca_me", "timeout": 30}, timeout=40)

                nursery.start_soon(long_wait)
                # the pending wait holds nothing up on the same connection
                assert (await client.call("health"))["status"] == "ok"
                for text in ("one", "two", "three"):
                    await client.call("message.send", {"caller": "ca_you", "content": text, "to": ["ca_me"]})
                await got_three.wait()
            assert [text for _, text in notes] == ["one", "two", "three"]
            assert [seq for seq, _ in notes] == sorted(seq for seq, _ in notes)
            assert waited["r"]["messages"][0]["body"]["content"] == "one"


async def test_errors_are_typed(shared):
    async with client_async.open_client(shared.paths) as client:
        with pytest.raises(MethodNotFound):
            await client.call("no.such.method")
        shared.register("ca_err", "ca_err_role")
        with pytest.raises(UnknownRecipient) as info:
            await client.call("message.send", {"caller": "ca_err", "content": "x", "to": ["ca_er"]})
        assert "@ca_err" in info.value.data["close_matches"]


async def test_a_lost_connection_fails_pending_calls_and_open_without_daemon_is_unavailable(fresh):
    d = fresh()
    d.register("ca_lost", "ca_role")
    async with client_async.open_client(d.paths) as client:
        async with trio.open_nursery() as nursery:
            failure = {}

            async def pending():
                try:
                    await client.call("message.wait", {"caller": "ca_lost", "timeout": 60}, timeout=90)
                except Unavailable as exc:
                    failure["e"] = exc

            nursery.start_soon(pending)
            pid = (await client.call("health"))["pid"]  # the wait is in flight
            os.kill(pid, signal.SIGKILL)  # a crash: nobody answers the wait
        # the wait fails at once, whichever end noticed the crash first (its reader, or its own send
        # when the kill came before the wait was written: a loaded machine schedules either)
        message = failure["e"].message
        assert "closed the connection" in message or "lost the connection" in message, message
        await trio.to_thread.run_sync(d.stop)  # returns once the killed process is gone (its flock released)
        assert client.closed.is_set()
        with pytest.raises(Unavailable):
            await client.call("health")
    with pytest.raises(Unavailable) as info:
        async with client_async.open_client(d.paths):
            pass
    assert "not running" in info.value.message
    with daemon_env():
        async with client_async.open_client(d.paths, autostart=True) as client:
            assert (await client.call("health"))["status"] == "ok"


async def test_reconnecting_runs_the_session_again_after_a_restart(fresh):
    d = fresh()
    sessions = []
    first, second = trio.Event(), trio.Event()
    kick = trio.Event()

    async def session(client):
        sessions.append((await client.call("health"))["pid"])
        first.set()
        if len(sessions) == 2:
            second.set()
        await client.closed.wait()

    with trio.fail_after(WAIT * 2):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: client_async.reconnecting(d.paths, session, kick=lambda: kick))
            await first.wait()
            await trio.to_thread.run_sync(d.stop)
            await trio.to_thread.run_sync(d.start)
            kick.set()
            await second.wait()
            nursery.cancel_scope.cancel()
    assert sessions[0] != sessions[1]  # a new daemon process


def test_it_runs_under_asyncio_too(shared):
    shared.register("ca_aio", "ca_aio_role")

    async def main():
        seen = anyio.Event()

        def on_note(method, params):
            if method == "message.create":
                seen.set()

        async with client_async.open_client(shared.paths, on_notification=on_note) as client:
            await client.call("subscribe.create", {"filter_type": "mention", "mention": "ca_aio"})
            await client.call("message.send", {"caller": "ca_aio", "content": "asyncio", "to": ["ca_aio"]})
            with anyio.fail_after(WAIT):
                await seen.wait()
            return (await client.call("health"))["status"]

    assert anyio.run(main, backend="asyncio") == "ok"


async def test_every_send_carries_an_idempotency_key_so_a_retry_writes_once(shared):
    shared.register("ca_idem", "ca_idem_role")
    async with client_async.open_client(shared.paths) as client:
        first = await client.call("message.send", {"caller": "ca_idem", "content": "once", "idempotency_key": "k-1"})
        again = await client.call("message.send", {"caller": "ca_idem", "content": "once", "idempotency_key": "k-1"})
        assert again["message_id"] == first["message_id"]
        a = await client.call("message.send", {"caller": "ca_idem", "content": "twice"})
        b = await client.call("message.send", {"caller": "ca_idem", "content": "twice"})
        assert a["message_id"] != b["message_id"]  # fresh keys: two sends are two messages
    worktree = shared.paths.main_repo / ".git" / "thrum-sync" / "a-sync"
    lines = [
        line
        for f in worktree.rglob("*.jsonl")
        for line in f.read_bytes().splitlines()
        if a["message_id"].encode() in line and b'"message.create"' in line
    ]
    assert len(lines) == 1
    assert b'"idempotency_key"' in lines[0]  # added by the client, not by the caller
