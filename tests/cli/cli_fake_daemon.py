"""A stand-in daemon for CLI unit tests: a Unix socket server in a thread that
answers JSON-RPC lines from a table of handlers and records every request."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Any, Callable

from thrum.errors import ThrumError

Handler = Callable[[dict], Any]


class FakeDaemon:
    def __init__(self, socket_path: Path, handlers: dict[str, Handler] | None = None):
        self.socket_path = str(socket_path)
        self.handlers: dict[str, Handler] = dict(handlers or {})
        self.requests: list[dict] = []
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def on(self, method: str, handler: Handler | Any) -> None:
        self.handlers[method] = handler if callable(handler) else (lambda _p, v=handler: v)

    def calls(self, method: str) -> list[dict]:
        return [r["params"] for r in self.requests if r.get("method") == method]

    @property
    def methods(self) -> list[str]:
        return [r.get("method") for r in self.requests]

    def __enter__(self) -> "FakeDaemon":
        Path(self.socket_path).parent.mkdir(parents=True, exist_ok=True)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.socket_path)
        self._sock.listen(8)
        self._sock.settimeout(0.05)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(2)
        if self._sock:
            self._sock.close()
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as fh:
            for line in fh:
                req = json.loads(line)
                self.requests.append(req)
                method = req.get("method")
                handler = self.handlers.get(method)
                if handler is None:
                    resp = {
                        "jsonrpc": "2.0",
                        "id": req["id"],
                        "error": {"code": -32601, "message": f"unknown method {method}"},
                    }
                else:
                    try:
                        resp = {"jsonrpc": "2.0", "id": req["id"], "result": handler(req.get("params") or {})}
                    except ThrumError as exc:
                        resp = {"jsonrpc": "2.0", "id": req["id"], "error": exc.to_rpc()}
                # a notification first, to prove the client skips it
                fh.write(b'{"jsonrpc":"2.0","method":"message.create","params":{}}\n')
                fh.write(json.dumps(resp).encode() + b"\n")
                fh.flush()
