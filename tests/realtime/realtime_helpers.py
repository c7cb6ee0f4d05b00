"""Helpers for the real-time tests: a daemon handle and a JSON-RPC client over the
third-party ``websockets`` library (asyncio), to prove the WebSocket interoperates
with a client we did not write."""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from fixtures.daemon_env import daemon_env
from fixtures.repos.builders import make_repo
from thrum import identity
from thrum import lifecycle

WAIT = 15.0  # generous upper bound for any single awaited event (never a sleep)


# ---------------------------------------------------------------------------- daemon


@dataclass
class Daemon:
    paths: object
    repo: Path

    @property
    def port(self) -> int:
        return int(self.paths.ws_port_file.read_text().strip())

    @property
    def token(self) -> str:
        return self.paths.ws_token_file.read_text().strip()

    def url(self, *, token: str | None = None, path: str = "/ws", query: bool = False) -> str:
        base = f"ws://127.0.0.1:{self.port}{path}"
        return f"{base}?token={quote(token if token is not None else self.token)}" if query else base

    def auth(self, token: str | None = None) -> dict:
        return {"Authorization": f"Bearer {token if token is not None else self.token}"}

    def call(self, method: str, params: dict | None = None, timeout: float = WAIT):
        """One RPC over the Unix socket."""
        return lifecycle.call(self.paths, method, params, timeout=timeout)

    def register(self, name: str, role: str, module: str = "core", *, identity_file: bool = False) -> dict:
        result = self.call("agent.register", {"name": name, "role": role, "module": module})
        if identity_file:
            identity.write(self.paths.identities, identity.Identity(name=name, role=role, module=module))
        return result

    def send(self, caller: str, content: str, **params) -> dict:
        return self.call("message.send", {"caller": caller, "content": content, **params})

    async def ws(self, **kw) -> "WsClient":
        return await WsClient.open(self.url(), additional_headers=self.auth(), **kw)

    def start(self) -> None:
        with daemon_env():
            lifecycle.start(self.paths)

    def stop(self) -> None:
        lifecycle.stop(self.paths)


# settings the environment would override; the tests' daemons take theirs from config.json


def start_daemon(root: Path, config: dict | None = None, *, repo: Path | None = None) -> Daemon:
    """A daemon for a fresh repository under ``root`` (or for ``repo``): local only unless
    ``config`` says otherwise, any free WebSocket port."""
    if repo is None:
        repo = root / "repo"
        repo.parent.mkdir(parents=True, exist_ok=True)
        make_repo(repo)
    paths = lifecycle.init_repo(repo, start_daemon=False)
    paths.config.write_text(json.dumps({"local_only": True, "ws_port": 0, **(config or {})}))
    d = Daemon(paths, repo)
    d.start()
    return d


# ---------------------------------------------------------------------------- client


class RpcError(Exception):
    def __init__(self, error: dict):
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error
        self.code = error.get("code")


class WsClient:
    """JSON-RPC over `websockets`: replies are matched by id, notifications queue up in order."""

    def __init__(self, ws: ClientConnection, *, reading: bool = True):
        self.ws = ws
        self._next_id = 0
        self._pending: dict = {}
        self.notes: asyncio.Queue = asyncio.Queue()
        self.unmatched: asyncio.Queue = asyncio.Queue()  # replies nobody waits for (id null, ...)
        self._reader = asyncio.create_task(self._read()) if reading else None

    @classmethod
    async def open(cls, url: str, *, reading: bool = True, **kw) -> "WsClient":
        return cls(await connect(url, **kw), reading=reading)

    def start_reading(self) -> None:
        if self._reader is None:
            self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                msg = json.loads(raw)
                if isinstance(msg, dict) and "method" in msg and "id" not in msg:
                    self.notes.put_nowait(msg)
                    continue
                fut = self._pending.pop(msg.get("id"), None) if isinstance(msg, dict) else None
                if fut is not None and not fut.done():
                    fut.set_result(msg)
                else:
                    self.unmatched.put_nowait(msg)
        except ConnectionClosed:
            pass
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("WebSocket closed"))

    async def request(self, method: str, params: dict | None = None, *, timeout: float = WAIT) -> dict:
        self._next_id += 1
        rid = self._next_id
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}))
        return await asyncio.wait_for(fut, timeout)

    async def call(self, method: str, params: dict | None = None, *, timeout: float = WAIT):
        reply = await self.request(method, params, timeout=timeout)
        if reply.get("error"):
            raise RpcError(reply["error"])
        return reply["result"]

    async def note(self, timeout: float = WAIT) -> dict:
        return await asyncio.wait_for(self.notes.get(), timeout)

    async def until(self, predicate, timeout: float = WAIT) -> list[dict]:
        """Every notification up to and including the first one ``predicate`` accepts."""
        got = []

        async def run():
            while True:
                n = await self.notes.get()
                got.append(n)
                if predicate(n):
                    return

        await asyncio.wait_for(run(), timeout)
        return got

    async def close(self) -> None:
        await self.ws.close()
        if self._reader is not None:
            await self._reader


def is_create_of(message_id: str):
    return lambda n: n["method"] == "message.create" and n["params"]["message_id"] == message_id


def small_buffer_socket(port: int) -> socket.socket:
    """A connected TCP socket with a tiny receive buffer (a client that reads slowly fills it fast)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    return s
