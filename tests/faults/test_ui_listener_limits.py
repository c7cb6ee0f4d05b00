"""Issue 31 finding 10: the Web UI's HTTP port under the daemon's connection limits.

Before, the UI's listener accepted every TCP connection and parked it with no cap
and no timeout, outside the daemon's connection registry: any local user could use
up the daemon's descriptors through it. Now it is one more transport of the
registry, like the Unix socket and the WebSocket.
"""

from __future__ import annotations

import socket

from faults_helpers import read_by_the_daemon
from fixtures.waiting import until
from thrum import errors

WAIT = 10.0


def _ui_port(d) -> int:
    return d.call("ui.open", {"port": 0})["port"]


def _connect(port: int, timeout: float = WAIT) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def _answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def _get(port: int) -> bytes:
    with _connect(port) as s:
        s.sendall(f"GET /static/app.css HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        return _answer(s)


def test_over_the_cap_the_ui_answers_503_and_shares_the_cap_with_the_socket(fresh):
    d = fresh({"max_connections": 10, "request_timeout": 60})
    port = _ui_port(d)
    held = []
    for _ in range(10):  # each holds an unfinished request head: busy, never evicted
        s = _connect(port)
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        held.append(s)
    # a connection that has sent nothing yet is idle (evictable) until the daemon reads its bytes
    until(lambda: all(read_by_the_daemon(s) for s in held), "the daemon to read the 10 request heads", timeout=WAIT)
    # the Unix socket's clients count the same slots; none of these is idle
    until(lambda: _refused(d), "the daemon to have accepted the 10 busy clients", timeout=WAIT)
    refused = _get(port)
    assert refused.startswith(b"HTTP/1.1 503") and b"too many connections" in refused
    for s in held:
        s.close()
    until(lambda: _get(port).startswith(b"HTTP/1.1 200"), "the slots to come back", timeout=WAIT)


def _refused(d) -> bool:
    try:
        d.call("health", timeout=5)
    except errors.Unavailable as exc:
        return "too many connections" in exc.message
    return False


def test_an_unfinished_request_head_is_cut_off_with_408(fresh):
    d = fresh({"request_timeout": 1})
    port = _ui_port(d)
    with _connect(port, timeout=15) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1")
        answer = _answer(s)  # within the socket's timeout, or it raises
    assert answer.startswith(b"HTTP/1.1 408") and b"not completed within 1s" in answer


def test_an_idle_keep_alive_connection_closes_after_idle_timeout(fresh):
    d = fresh({"idle_timeout": 1})
    port = _ui_port(d)
    with _connect(port, timeout=15) as s:
        s.sendall(f"GET /static/app.css HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        first = s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        rest = _answer(s)  # then silence, and the server closes (within the socket's timeout, or it raises)
    assert b"HTTP/1.1" not in rest


def test_idle_ui_connections_make_room_for_new_clients(fresh):
    d = fresh({"max_connections": 10, "request_timeout": 60})
    port = _ui_port(d)
    crowd = [_connect(port) for _ in range(40)]  # four times the cap, all idle
    assert d.call("health")["status"] == "ok"
    assert _get(port).startswith(b"HTTP/1.1 200")
    status = d.call("daemon.status")["clients"]
    assert status["evicted"] >= 30 and status["open"] <= status["max"]
    for s in crowd:
        s.close()
