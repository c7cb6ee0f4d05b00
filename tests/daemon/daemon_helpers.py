"""Helpers shared by the daemon tests (a raw persistent JSON-RPC connection)."""

from __future__ import annotations

import json
import socket


class RawClient:
    """A persistent newline-delimited JSON-RPC connection (what any client would do)."""

    def __init__(self, paths, timeout: float = 20.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(paths.socket))
        self.buf = b""
        self.next_id = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("daemon closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.send_raw(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}).encode()
            + b"\n"
        )
        while True:
            reply = self.read()
            if reply.get("id") == self.next_id:
                return reply

    def call(self, method: str, params: dict | None = None):
        reply = self.request(method, params)
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        return reply["result"]

    def close(self) -> None:
        self.sock.close()


def register(client: RawClient, name: str, role: str, module: str = "core") -> dict:
    return client.call("agent.register", {"name": name, "role": role, "module": module})
