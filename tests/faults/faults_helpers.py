"""Helpers for the fault tests: a daemon handle, raw sockets, and what /proc says of a process."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import struct
import termios
from dataclasses import dataclass
from pathlib import Path

from fixtures.daemon_env import daemon_env
from fixtures.repos.builders import make_repo
from fixtures.waiting import until
from thrum import lifecycle
from thrum.client import Client


@dataclass
class Daemon:
    paths: object
    repo: Path

    @property
    def pid(self) -> int:
        return lifecycle.read_pid(self.paths)

    def client(self, timeout: float = 20.0) -> Client:
        return Client(self.paths, timeout=timeout)

    def call(self, method: str, params: dict | None = None, timeout: float = 20.0):
        with self.client(timeout) as c:
            return c.call(method, params)

    def register(self, name: str, role: str = "implementer") -> None:
        self.call("agent.register", {"name": name, "role": role, "module": "core"})

    def start(self) -> None:
        with daemon_env():
            lifecycle.start(self.paths)

    def stop(self) -> None:
        lifecycle.stop(self.paths)

    def log_text(self) -> str:
        return self.paths.log_file.read_text(errors="replace")

    @property
    def shard_root(self) -> Path:
        return self.paths.main_repo / ".git" / "thrum-sync" / "a-sync"

    def log_lines(self) -> list[bytes]:
        """Every line of every log file (whatever the layout: single files or segments)."""
        out = []
        for p in sorted(self.shard_root.rglob("*.jsonl")):
            out += p.read_bytes().splitlines()
        return out

    def log_events(self, etype: str | None = None) -> list[dict]:
        events = [json.loads(line) for line in self.log_lines() if line.strip()]
        return [e for e in events if etype is None or e.get("type") == etype]


def start_daemon(root: Path, config: dict | None = None, *, repo: Path | None = None, start: bool = True) -> Daemon:
    if repo is None:
        repo = root / "repo"
        repo.parent.mkdir(parents=True, exist_ok=True)
        make_repo(repo)
    paths = lifecycle.init_repo(repo, start_daemon=False)
    paths.config.write_text(json.dumps({"local_only": True, "ws_port": 0, **(config or {})}))
    d = Daemon(paths, repo)
    if start:
        d.start()
    return d


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def settle_rss(pid: int, target: float, timeout: float = 15.0) -> float:
    """RSS once it is at or under ``target`` MiB (or whatever it is after ``timeout``)."""
    try:
        return until(lambda: (rss := rss_mib(pid)) <= target and rss, "RSS to settle", timeout=timeout, every=0.2)
    except AssertionError:
        return rss_mib(pid)


def raw_socket(paths, timeout: float = 10.0) -> socket.socket:
    """A connected socket; waits while the listen backlog is full, as a blocking client would."""

    def connected() -> socket.socket | None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(str(paths.socket))
            return s
        except BlockingIOError:
            s.close()
            return None

    return until(connected, "room in the listen backlog", timeout=timeout, every=0.01)


def read_lines_until_eof(sock: socket.socket) -> list[dict]:
    """Everything the daemon says until it hangs up."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return [json.loads(line) for line in data.splitlines() if line.strip()]


# ---------------------------------------------------------------------------- raw WebSocket


def ws_port_token(paths) -> tuple[int, str]:
    return int(paths.ws_port_file.read_text().strip()), paths.ws_token_file.read_text().strip()


def ws_raw(paths, timeout: float = 10.0) -> tuple[socket.socket, bytes]:
    """A TCP connection that has sent a WebSocket handshake; returns it and the response head."""
    port, token = ws_port_token(paths)
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {token}\r\n\r\n"
        ).encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    return s, head


def read_by_the_daemon(s: socket.socket) -> bool:
    """Whether the daemon has read everything sent on ``s`` (a client socket), so a test
    can wait for it instead of sleeping. Unix sockets: nothing left in our send queue (the
    kernel frees it as the peer reads). TCP: the daemon's end of the connection holds
    nothing unread (rx_queue in /proc/net/tcp)."""
    if s.family == socket.AF_UNIX:
        return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0] == 0
    mine = "%08X:%04X" % (0x0100007F, s.getsockname()[1])  # 127.0.0.1 in /proc's byte order
    theirs = "%08X:%04X" % (0x0100007F, s.getpeername()[1])
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == theirs and fields[2] == mine:
            return int(fields[4].split(":")[1], 16) == 0
    return False  # not accepted yet


def ws_frame_header(length: int, opcode: int = 1, fin: bool = True) -> bytes:
    """A masked client frame header (mask key zero, so the payload goes as is)."""
    first = (0x80 if fin else 0) | opcode
    if length < 126:
        return bytes([first, 0x80 | length]) + b"\0\0\0\0"
    if length < 65536:
        return bytes([first, 0x80 | 126]) + length.to_bytes(2, "big") + b"\0\0\0\0"
    return bytes([first, 0x80 | 127]) + length.to_bytes(8, "big") + b"\0\0\0\0"


def ws_close_code(sock: socket.socket) -> int | None:
    """Read frames until a close frame; its status code (None: the TCP connection just ended)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout, TimeoutError):
            chunk = b""
        if not chunk:
            return None
        data += chunk
        while len(data) >= 2:
            opcode, n = data[0] & 0x0F, data[1] & 0x7F
            at = 2
            if n == 126:
                n, at = int.from_bytes(data[2:4], "big"), 4
            elif n == 127:
                n, at = int.from_bytes(data[2:10], "big"), 10
            if len(data) < at + n:
                break
            payload, data = data[at : at + n], data[at + n :]
            if opcode == 8:
                return int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
