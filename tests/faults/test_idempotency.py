"""Finding 5 of issue 15: a timeout that lied, and a retry that duplicated.

A daemon stopped with SIGSTOP is what a client sees of a daemon busy behind a
long sync: the request is accepted by the kernel and nothing answers.
"""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from thrum import errors
from thrum.client import Client

from faults_helpers import raw_socket


def _creates(d, content: str | None = None) -> list[dict]:
    return [e for e in d.log_events("message.create") if content is None or e["body"]["content"] == content]


def test_a_retry_with_the_same_key_returns_the_first_result(fresh):
    d = fresh()
    d.register("alice")
    d.register("bob")
    params = {"caller": "alice", "content": "once", "to": ["@bob"], "idempotency_key": "k-1"}
    first = d.call("message.send", params)
    again = d.call("message.send", params)
    assert again == first
    assert [e["message_id"] for e in _creates(d, "once")] == [first["message_id"]]
    assert _creates(d, "once")[0]["idempotency_key"] == "k-1"
    with pytest.raises(errors.Conflict) as reused:
        d.call("message.send", {**params, "content": "something else"})
    assert "already used" in reused.value.message
    assert d.call("message.send", {**params, "caller": "bob", "to": []})["message_id"] != first["message_id"]

    edit = {"caller": "alice", "message_id": first["message_id"], "content": "twice", "idempotency_key": "e-1"}
    edited = d.call("message.edit", edit)
    assert d.call("message.edit", edit) == edited
    assert edited["version"] == 1
    assert len(d.log_events("message.edit")) == 1


def test_keys_outlive_a_restart_and_a_rebuild(fresh):
    d = fresh()
    d.register("alice")
    params = {"caller": "alice", "content": "durable once", "idempotency_key": "k-restart"}
    first = d.call("message.send", params)
    d.stop()
    d.start()
    assert d.call("message.send", params) == {**first, "recipients": []}
    d.stop()
    d.paths.database.unlink()
    d.start()
    assert d.call("message.send", params)["message_id"] == first["message_id"]
    assert len(_creates(d, "durable once")) == 1


def test_a_timed_out_send_says_it_may_have_been_stored_and_its_retry_is_safe(fresh):
    """Finding 5: a send stuck behind a sync reported failure although stored; the retry duplicated it."""
    d = fresh()
    d.register("alice")
    pid = d.pid
    params = {"caller": "alice", "content": "stuck", "idempotency_key": "k-stuck"}
    os.kill(pid, signal.SIGSTOP)
    try:
        # The first attempt's connection stays open (its process still waits); the same
        # client's patience runs out on a second connection.
        first = raw_socket(d.paths, timeout=30)
        first.sendall(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message.send", "params": params}).encode() + b"\n"
        )
        with Client(d.paths, timeout=1.0) as c:
            with pytest.raises(errors.Timeout) as timed_out:
                c.call("message.send", params)
            with pytest.raises(errors.Timeout) as read_timed_out:
                c.call("message.list", {})
    finally:
        os.kill(pid, signal.SIGCONT)
    exc = timed_out.value
    assert exc.data == {"may_have_written": True, "idempotency_key": "k-stuck"}
    assert "may still have been stored" in exc.message and "k-stuck" in exc.message
    assert read_timed_out.value.data["may_have_written"] is False
    assert "nothing was changed" in read_timed_out.value.message
    stored_first = json.loads(first.makefile("rb").readline())["result"]
    first.close()
    retried = d.call("message.send", params)
    assert retried["message_id"] == stored_first["message_id"]
    assert [e["message_id"] for e in _creates(d, "stuck")] == [retried["message_id"]]


def test_an_unanswered_send_gets_a_key_to_retry_with(fresh):
    d = fresh()
    d.register("alice")
    pid = d.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        with Client(d.paths, timeout=0.5) as c, pytest.raises(errors.Timeout) as timed_out:
            c.call("message.send", {"caller": "alice", "content": "keyed for me"})
    finally:
        os.kill(pid, signal.SIGCONT)
    key = timed_out.value.data["idempotency_key"]
    first = d.call("message.send", {"caller": "alice", "content": "keyed for me", "idempotency_key": key})
    again = d.call("message.send", {"caller": "alice", "content": "keyed for me", "idempotency_key": key})
    assert first == again
    assert len(_creates(d, "keyed for me")) == 1


def _send_raw(paths, params: dict, out: list, i: int) -> None:
    s = raw_socket(paths, timeout=30)
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message.send", "params": params}).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    out[i] = json.loads(data)


def test_concurrent_attempts_with_one_key_write_once(fresh):
    """The retry arrives while the first attempt is still waiting: both get the first result."""
    d = fresh()
    d.register("alice")
    pid = d.pid
    params = {"caller": "alice", "content": "racing", "idempotency_key": "k-race"}
    answers: list = [None] * 4
    os.kill(pid, signal.SIGSTOP)
    try:
        threads = [threading.Thread(target=_send_raw, args=(d.paths, params, answers, i)) for i in range(4)]
        for t in threads:
            t.start()
    finally:
        os.kill(pid, signal.SIGCONT)
    for t in threads:
        t.join(30)
    ids = {a["result"]["message_id"] for a in answers}
    assert len(ids) == 1
    assert [e["message_id"] for e in _creates(d, "racing")] == list(ids)


def test_every_front_end_sends_a_key(fresh):
    """thrum.client adds one to message.send and message.edit, so the CLI, MCP and gc-mail all do."""
    d = fresh()
    d.register("alice")
    with Client(d.paths) as c:
        mid = c.call("message.send", {"caller": "alice", "content": "keyed by the client"})["message_id"]
        c.call("message.edit", {"caller": "alice", "message_id": mid, "content": "edited"})
    assert _creates(d, "keyed by the client")[0]["idempotency_key"].startswith("k_")
    assert d.log_events("message.edit")[0]["idempotency_key"].startswith("k_")


def test_a_bad_key_is_a_params_error(fresh):
    d = fresh()
    d.register("alice")
    for bad in ("", "has space", "x" * 129, 5):
        params = {"caller": "alice", "content": "x", "idempotency_key": bad}
        if bad == "":
            d.call("message.send", params)  # empty: no key (the client's own default is a random one)
            continue
        with pytest.raises(errors.ValidationError) as exc:
            d.call("message.send", params)
        assert exc.value.data["field"] == "idempotency_key"
