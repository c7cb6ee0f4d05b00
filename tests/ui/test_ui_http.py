"""`thrum ui` and the UI's door, without a browser: the one-time login, the session's
two halves (cookie and page key), Host and Origin checks on the page's server and on
the daemon's WebSocket, sessions across restarts, and the hand-over to a browser."""

from __future__ import annotations

import asyncio
import socket
import stat
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from ui_helpers import http_get, login, page_key


def _code_target(ui: dict) -> str:
    url = urlsplit(ui["url"])
    return f"{url.path}?{url.query}"


def _host(ui: dict) -> dict:
    return {"Host": f"127.0.0.1:{ui['port']}"}


def _ws(
    ws_port: int,
    *,
    origin: str | None = None,
    cookie: str | None = None,
    token: str | None = None,
    key: str | None = None,
):
    """Open the daemon's WebSocket and call health: the result, or (status, body) of the refusal.

    ``key``: the page key, offered as the page does (subprotocol ``thrum-key.<key>``)."""
    headers = {}
    if cookie:
        headers["Cookie"] = cookie
    if token:
        headers["Authorization"] = f"Bearer {token}"
    protocols = ["thrum", f"thrum-key.{key}"] if key else None

    async def go():
        try:
            async with connect(
                f"ws://127.0.0.1:{ws_port}/ws", origin=origin, additional_headers=headers, subprotocols=protocols
            ) as ws:
                await ws.send('{"jsonrpc":"2.0","id":1,"method":"health"}')
                return ("ok", await asyncio.wait_for(ws.recv(), 15))
        except InvalidStatus as exc:
            return (exc.response.status_code, exc.response.body.decode())

    return asyncio.run(go())


def test_thrum_ui_prints_a_url_whose_code_signs_in_one_browser_once(repo):
    proc = repo.run("ui")
    url = proc.stdout.strip()
    assert url.startswith("http://127.0.0.1:") and "/login?code=" in url and "#key=" in url and "\n" not in url
    assert "expires in 5 minutes" in proc.stderr
    ui = repo.ui()
    assert set(ui) >= {"url", "port", "ws_port", "expires_in"} and ui["expires_in"] == 300
    assert ui["ws_port"] == repo.rpc("daemon.status")["ws_port"]

    first = http_get(ui["port"], _code_target(ui), _host(ui))
    assert first.status == 303 and first.header("location") == "/"
    cookie_header = first.header("set-cookie")
    attrs = {a.strip() for a in cookie_header.split(";")[1:]}
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= attrs
    assert cookie_header.startswith(f"thrum_ui_{ui['port']}_")
    assert page_key(ui) not in cookie_header  # the page key never travels with the cookie

    again = http_get(ui["port"], _code_target(ui), _host(ui))
    assert again.status == 403 and b"thrum ui" in again.body and again.header("set-cookie") is None
    made_up = http_get(ui["port"], "/login?code=guess", _host(ui))
    assert made_up.status == 403


def test_the_page_needs_the_cookie_and_names_the_websocket_port(repo):
    ui = repo.ui()
    cookie = login(ui)
    page = http_get(ui["port"], "/", {**_host(ui), "Cookie": cookie})
    assert page.status == 200 and page.header("content-type").startswith("text/html")
    assert f'content="{ui["ws_port"]}"'.encode() in page.body
    assert page.header("cache-control") == "no-store"
    anonymous = http_get(ui["port"], "/", _host(ui))
    assert anonymous.status == 401 and b"thrum ui" in anonymous.body
    session = http_get(ui["port"], "/api/session", _host(ui))
    assert session.status == 200 and b'"authenticated": false' in session.body
    session = http_get(ui["port"], "/api/session", {**_host(ui), "Cookie": cookie})
    assert b'"authenticated": true' in session.body


def test_a_signed_in_browser_reopening_a_used_link_just_lands_on_the_page(repo):
    ui = repo.ui()
    cookie = login(ui)
    reply = http_get(ui["port"], _code_target(ui), {**_host(ui), "Cookie": cookie})
    assert reply.status == 303 and reply.header("location") == "/" and reply.header("set-cookie") is None


def test_every_answer_keeps_frames_and_other_origins_out(repo):
    ui = repo.ui()
    for target in ("/", "/static/js/app.js", "/login?code=x", "/nope"):
        reply = http_get(ui["port"], target, _host(ui))
        csp = reply.header("content-security-policy")
        assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp, target
        assert f"ws://127.0.0.1:{ui['ws_port']}" in csp
        assert reply.header("x-frame-options") == "DENY"
        assert reply.header("referrer-policy") == "no-referrer"
        assert reply.header("x-content-type-options") == "nosniff"
        assert reply.header("access-control-allow-origin") is None


def test_a_dns_rebound_host_is_refused_and_does_not_use_up_the_code(repo):
    ui = repo.ui()
    for host in (f"evil.example:{ui['port']}", f"127.0.0.1:{ui['port'] + 1}", "127.0.0.1"):
        reply = http_get(ui["port"], _code_target(ui), {"Host": host})
        assert reply.status == 421, host
        assert reply.header("set-cookie") is None
    assert login(ui)  # still valid for the real host
    assert http_get(ui["port"], "/", {"Host": f"localhost:{ui['port']}", "Cookie": login(repo.ui())}).status == 200


def test_the_ui_changes_nothing_over_http(repo):
    ui = repo.ui()
    cookie = login(ui)
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        reply = http_get(ui["port"], "/", {**_host(ui), "Cookie": cookie}, method=method)
        assert reply.status == 405 and reply.header("allow") == "GET, HEAD", method
    head = http_get(ui["port"], "/", {**_host(ui), "Cookie": cookie}, method="HEAD")
    assert head.status == 200 and head.body == b"" and int(head.header("content-length")) > 0


def test_static_files_with_revalidation_and_nothing_else(repo):
    ui = repo.ui()
    js = http_get(ui["port"], "/static/js/app.js", _host(ui))
    assert js.status == 200 and js.header("content-type").startswith("text/javascript")
    etag = js.header("etag")
    assert etag and js.header("cache-control") == "no-cache"
    same = http_get(ui["port"], "/static/js/app.js", {**_host(ui), "If-None-Match": etag})
    assert same.status == 304 and same.body == b""
    assert http_get(ui["port"], "/static/app.css", _host(ui)).header("content-type").startswith("text/css")
    for target in (
        "/static/../access.py",
        "/static/%2e%2e/hook.py",
        "/static/index.html",
        "/static/",
        "/etc/passwd",
        "/static/js/../../app.py",
    ):
        assert http_get(ui["port"], target, _host(ui)).status == 404, target


def test_a_malformed_request_is_answered_400_and_the_server_keeps_serving(repo):
    ui = repo.ui()
    with socket.create_connection(("127.0.0.1", ui["port"]), timeout=15) as s:
        s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    with socket.create_connection(("127.0.0.1", ui["port"]), timeout=15) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431")
    assert http_get(ui["port"], "/static/app.css", _host(ui)).status == 200


def test_the_websocket_admits_the_page_only_with_both_halves_and_its_origin(repo):
    ui = repo.ui()
    cookie, key = login(ui), page_key(ui)
    token = (repo.path / ".thrum" / "var" / "ws.token").read_text().strip()
    own = f"http://127.0.0.1:{ui['port']}"
    assert _ws(ui["ws_port"], origin=own, cookie=cookie, key=key)[0] == "ok"
    assert _ws(ui["ws_port"], origin=f"http://localhost:{ui['port']}", cookie=cookie, key=key)[0] == "ok"
    status, body = _ws(ui["ws_port"], origin=own)
    assert status == 401 and "thrum ui" in body
    assert _ws(ui["ws_port"], origin=own, cookie=cookie[:-2] + "xx", key=key)[0] == 401
    assert _ws(ui["ws_port"], origin=own, cookie=cookie, key=key[:-2] + "xx")[0] == 401
    assert _ws(ui["ws_port"], origin=own, token=token, key=key)[0] == 401  # the UI's origin never by token
    # another session's key does not go with this cookie
    other = repo.ui()
    login(other)
    assert _ws(ui["ws_port"], origin=own, cookie=cookie, key=page_key(other))[0] == 401
    # cookies ignore ports: a page on another local port carries the cookie, and is refused by its Origin
    for origin in (f"http://127.0.0.1:{ui['port'] + 1}", "http://evil.example", "null"):
        status, body = _ws(ui["ws_port"], origin=origin, cookie=cookie, key=key)
        assert status == 403 and "Origin" in body, origin
    # the cookie is no credential for a client without an Origin (those use the token)
    assert _ws(ui["ws_port"], cookie=cookie, key=key)[0] == 401
    assert _ws(ui["ws_port"], token=token)[0] == "ok"


def test_the_cookie_alone_replayed_with_the_uis_origin_is_refused(repo):
    """Issue 27 finding 3: another local server receives the cookie; replayed from a
    script with the UI's Origin it must open nothing."""
    ui = repo.ui()
    cookie = login(ui)
    status, body = _ws(ui["ws_port"], origin=f"http://127.0.0.1:{ui['port']}", cookie=cookie)
    assert status == 401 and "page key" in body
    page = http_get(ui["port"], "/", {**_host(ui), "Cookie": cookie})
    assert page.status == 200 and b"thrum-ws-port" in page.body  # the page itself: no data in it
    assert page_key(ui).encode() not in page.body


def test_a_second_login_in_another_tab_keeps_the_first(repo):
    first, second = repo.ui(), repo.ui()
    c1 = login(first)
    c2 = login(second)
    both = f"{c1}; {c2}"  # the browser keeps both cookies (their names differ)
    assert c1.split("=")[0] != c2.split("=")[0]
    own = f"http://127.0.0.1:{first['port']}"
    assert _ws(first["ws_port"], origin=own, cookie=both, key=page_key(first))[0] == "ok"
    assert _ws(first["ws_port"], origin=own, cookie=both, key=page_key(second))[0] == "ok"


def test_a_daemon_restart_keeps_browser_sessions_and_sign_out_ends_them(fresh_repo):
    ui = fresh_repo.ui("--port", "0")
    cookie, key = login(ui), page_key(ui)
    state = fresh_repo.path / ".thrum" / "var" / "ui.session"
    assert stat.S_IMODE(state.stat().st_mode) == 0o600
    assert key not in state.read_text() and cookie.split("=", 1)[1] not in state.read_text()
    fresh_repo.run("daemon", "stop")
    fresh_repo.run("daemon", "start")
    status = fresh_repo.rpc("daemon.status")
    # the new daemon listens on the UI's port again by itself: the open page finds it
    session = http_get(ui["port"], f"/api/session?s={key.rsplit('.', 1)[0]}", {**_host(ui), "Cookie": cookie})
    assert session.status == 200 and b'"authenticated": true' in session.body
    assert f'"ws_port": {status["ws_port"]}'.encode() in session.body
    own = f"http://127.0.0.1:{ui['port']}"
    assert _ws(status["ws_port"], origin=own, cookie=cookie, key=key)[0] == "ok"
    assert http_get(ui["port"], _code_target(ui), _host(ui)).status == 403  # codes do not outlive it

    out = fresh_repo.run("ui", "--sign-out")
    assert "signed out" in out.stdout
    assert not state.exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", ui["port"]), timeout=5).close()
    again = fresh_repo.ui("--port", str(ui["port"]))
    assert _ws(again["ws_port"], origin=own, cookie=cookie, key=key)[0] == 401  # the old session is gone
    assert login(again)


def test_port_option_moves_the_ui_and_a_taken_port_is_one_clear_error(fresh_repo):
    first = fresh_repo.ui()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    moved = fresh_repo.ui("--port", str(free))
    assert moved["port"] == free and moved["url"].startswith(f"http://127.0.0.1:{free}/login?code=")
    assert login(moved)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", first["port"]), timeout=5).close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        proc = fresh_repo.run("ui", "--port", str(busy), check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"thrum: port {busy} is already in use; choose another with --port, or leave it out for a free one"
    ]
    assert fresh_repo.ui()["port"] == free  # still served where it was
    bad = fresh_repo.run("ui", "--port", "70000", check=False)
    assert bad.returncode == 2 and "--port" in bad.stderr


def test_open_flag_hands_the_browser_a_private_file_not_the_code(repo, tmp_path):
    """Issue 31 finding 11: the login code never appears on a browser's command line."""
    opener = tmp_path / "fake-browser"
    record = tmp_path / "opened.txt"
    copy = tmp_path / "copy.html"
    opener.write_text(f'#!/bin/sh\nprintf \'%s\' "$1" > {record}\ncp "${{1#file://}}" {copy}\n')
    opener.chmod(opener.stat().st_mode | stat.S_IXUSR)
    proc = repo.run("ui", "--open", extra_env={"BROWSER": f"{opener} %s"})
    url = proc.stdout.strip()
    argv = record.read_text()
    code = urlsplit(url).query.split("code=")[1]
    assert code not in argv and page_key({"url": url}) not in argv
    assert argv.startswith("file://") and "/.thrum/var/ui-open/" in argv
    handover = Path(argv[len("file://") :])
    assert stat.S_IMODE(handover.stat().st_mode) == 0o600
    assert stat.S_IMODE(handover.parent.stat().st_mode) == 0o700
    assert url in copy.read_text()  # the page forwards the browser to the login URL
    assert login({"url": url, "port": int(urlsplit(url).port)})
    assert not handover.exists()  # gone once its code is used


def test_open_flag_without_any_browser_still_prints_the_url(repo, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = repo.run(
        "ui",
        "--open",
        extra_env={
            "BROWSER": str(tmp_path / "no-such-browser") + " %s",
            "PATH": str(empty),
            "DISPLAY": "",
            "WAYLAND_DISPLAY": "",
        },
    )
    assert "/login?code=" in proc.stdout
    assert "could not open a web browser" in proc.stderr


def test_ui_has_help(repo):
    out = repo.run("ui", "--help").stdout
    assert "--open" in out and "--port" in out and "one-time" in out and "--sign-out" in out
