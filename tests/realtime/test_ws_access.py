"""The WebSocket's door: port and token files, token by header or query, Origin
checks, refusals that say why (and are logged without the token), frames that are
not requests."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from realtime_helpers import WsClient


def _refusal(daemon, url: str, headers: dict | None = None, origin: str | None = None) -> tuple[int, str]:
    async def go():
        with pytest.raises(InvalidStatus) as info:
            async with connect(url, additional_headers=headers or {}, origin=origin):
                pass
        resp = info.value.response
        return resp.status_code, resp.body.decode()

    return asyncio.run(go())


def _health(url: str, headers: dict | None = None, origin: str | None = None) -> dict:
    async def go():
        c = await WsClient.open(url, additional_headers=headers or {}, origin=origin)
        try:
            return await c.call("health")
        finally:
            await c.close()

    return asyncio.run(go())


def test_ws_port_and_token_files(shared):
    assert 0 < shared.port < 65536
    mode = stat.S_IMODE(os.stat(shared.paths.ws_token_file).st_mode)
    assert mode == 0o600
    assert len(shared.token) >= 40
    assert shared.call("daemon.status")["ws_port"] == shared.port


def test_ws_token_by_header_or_query_is_accepted(shared):
    assert _health(shared.url(), shared.auth())["status"] == "ok"
    assert _health(shared.url(query=True))["status"] == "ok"


def test_ws_without_or_with_a_wrong_token_is_refused_401(shared):
    status, body = _refusal(shared, shared.url())
    assert status == 401
    assert "ws.token" in body
    assert "Bearer" in body
    status, body = _refusal(shared, shared.url(), shared.auth("not-the-token"))
    assert status == 401
    assert "wrong token" in body
    status, _ = _refusal(shared, shared.url(token="nope", query=True))
    assert status == 401
    status, _ = _refusal(shared, shared.url(), {"Authorization": f"Basic {shared.token}"})
    assert status == 401


def test_ws_foreign_browser_origin_is_refused_403_even_with_the_token(shared):
    for origin in (
        "http://evil.example",
        "null",
        f"http://127.0.0.1:{shared.port + 1}",
        f"https://localhost:{shared.port}",
    ):
        status, body = _refusal(shared, shared.url(), shared.auth(), origin=origin)
        assert status == 403, origin
        assert "Origin" in body


def test_ws_own_origins_and_clients_without_origin_are_accepted(shared):
    for origin in (f"http://127.0.0.1:{shared.port}", f"http://localhost:{shared.port}", None):
        assert _health(shared.url(), shared.auth(), origin=origin)["status"] == "ok"


def test_ws_other_paths_are_404(shared):
    status, body = _refusal(shared, shared.url(path="/"), shared.auth())
    assert status == 404
    assert "/ws" in body
    status, _ = _refusal(shared, shared.url(path="/wsx"), shared.auth())
    assert status == 404


def test_ws_refusals_are_logged_without_the_token(shared):
    wrong = "wrong-token-" + "x" * 20
    _refusal(shared, shared.url(token=wrong, query=True))
    _refusal(shared, shared.url(), shared.auth(), origin="http://evil.example")
    log = shared.paths.log_file.read_text()
    assert "refused 401" in log
    assert "refused 403" in log
    assert shared.token not in log
    assert wrong not in log


def test_ws_malformed_oversized_and_binary_frames_get_jsonrpc_answers(shared):
    async def go():
        c = await shared.ws()
        try:
            await c.ws.send("{not json")
            bad = await asyncio.wait_for(c.unmatched.get(), 10)
            assert bad["error"]["code"] == -32700
            assert bad["id"] is None
            await c.ws.send(json.dumps({"jsonrpc": "2.0", "id": 7}))
            bad = await asyncio.wait_for(c.unmatched.get(), 10)
            assert bad["error"]["code"] == -32600
            assert bad["id"] == 7
            await c.ws.send(b"\xff\xfe binary garbage")
            bad = await asyncio.wait_for(c.unmatched.get(), 10)
            assert bad["error"]["code"] == -32700
            await c.ws.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "health"}).encode())
            ok = await asyncio.wait_for(c.unmatched.get(), 10)
            assert ok["id"] == 8
            assert ok["result"]["status"] == "ok"
            reply = await c.request("no.such.method")
            assert reply["error"]["code"] == -32601
            # the socket survived all of it
            assert (await c.call("health"))["status"] == "ok"
        finally:
            await c.close()

    asyncio.run(go())


def test_ws_frame_over_the_limit_is_answered_not_fatal(fresh):
    d = fresh({"ws_max_frame_bytes": 4096})

    async def go():
        c = await d.ws()
        try:
            await c.ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "health", "params": {"x": "y" * 5000}}))
            big = await asyncio.wait_for(c.unmatched.get(), 10)
            assert big["error"]["code"] == -32600
            assert "too large" in big["error"]["message"]
            assert (await c.call("health"))["status"] == "ok"
        finally:
            await c.close()

    asyncio.run(go())


def test_ws_port_falls_back_when_taken_and_token_changes_each_start(fresh):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    taken = blocker.getsockname()[1]
    try:
        d = fresh({"ws_port": taken})
        assert d.port != taken
        first_token = d.token
        assert _health(d.url(), d.auth())["status"] == "ok"
        d.stop()
        assert not d.paths.ws_port_file.exists()
        blocker.close()
        d.start()
        assert d.port == taken  # the configured port, now free
        assert d.token != first_token
        status, _ = _refusal(d, d.url(), d.auth(first_token))
        assert status == 401
    finally:
        blocker.close()
