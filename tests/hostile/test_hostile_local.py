"""Another local user, or anyone holding the WebSocket token or a UI session: what a
client of the daemon can make it run (issue 31, finding 1).

The attack: ``sync.run`` with ``env`` naming a git config file whose
``credential.helper`` is a shell command. The daemon ran ``git credential fill`` with
that config for this sync and, having kept the variable, for every later one.
The victim is a real daemon on a remote that asks for a login; the attacker speaks
the WebSocket protocol (the ``websockets`` library) or raw JSON-RPC on the socket.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import os
import socket
import sys
import tempfile
from pathlib import Path

import pygit2
import pytest
from websockets.asyncio.client import connect

from fixtures.repos.builders import make_replicas
from fixtures.servers.pytest_fixtures import git_http  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "replication"))
from replication_helpers import Machine, machine_env  # noqa: E402


@pytest.fixture
def victim(tmp_path, git_http):  # noqa: F811
    """A machine whose remote asks for a login; its daemon runs with none (it was
    initialised with a token, then restarted from a shell without one)."""
    replicas = make_replicas(tmp_path / "set", 1)
    server = git_http(tmp_path / "set", users={"alice": "s3cret"})
    path = replicas.clones[0]
    pygit2.Repository(str(path)).remotes.set_url("origin", server.url("remote.git"))
    home = tmp_path / "home"
    home.mkdir()
    m = Machine(path, machine_env(HOME=str(home), THRUM_GIT_TOKEN="s3cret", THRUM_GIT_USERNAME="alice")).init()
    m.env = {k: v for k, v in m.env.items() if k not in ("THRUM_GIT_TOKEN", "THRUM_GIT_USERNAME")}
    m.run("daemon", "restart")
    m.agent("alice", "implementer")
    yield m
    m.stop()


def _planted_helper(tmp_path: Path) -> tuple[Path, Path]:
    """A git config whose credential helper is a shell command that leaves a mark."""
    marker = tmp_path / "owned"
    config = tmp_path / "evil" / "gitconfig"
    config.parent.mkdir()
    config.write_text(f'[credential]\n\thelper = "!touch {marker}; false"\n')
    xdg = tmp_path / "evil" / "xdg"
    (xdg / "git").mkdir(parents=True)
    (xdg / "git" / "config").write_text(config.read_text())
    return config, marker


def _ws_call(m: Machine, method: str, params: dict) -> dict:
    """One JSON-RPC request over the daemon's WebSocket, with its token (as the UI holds it)."""
    port = int(m.paths.ws_port_file.read_text())
    token = m.paths.ws_token_file.read_text().strip()

    async def go():
        async with connect(
            f"ws://127.0.0.1:{port}/ws", additional_headers={"Authorization": f"Bearer {token}"}, open_timeout=20
        ) as ws:
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            return json.loads(await asyncio.wait_for(ws.recv(), 120))

    return asyncio.run(go())


def _socket_call(m: Machine, method: str, params: dict) -> dict:
    """One raw JSON-RPC request on the Unix socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(120)
        s.connect(str(m.paths.socket))
        s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def test_a_websocket_client_cannot_forward_credentials_or_settings(victim, tmp_path):
    config, marker = _planted_helper(tmp_path)
    for method in ("sync.run", "doctor.run"):
        answer = _ws_call(victim, method, {"env": {"GIT_CONFIG_GLOBAL": str(config)}})
        assert answer["error"]["code"] == -32002, answer  # forbidden, before anything runs
        assert "Unix socket" in answer["error"]["message"]
        answer = _ws_call(victim, method, {"env": {"THRUM_GIT_TOKEN": "s3cret", "THRUM_GIT_USERNAME": "alice"}})
        assert answer["error"]["code"] == -32002, answer  # even a harmless-looking login
    failed = victim.run("sync", check=False)  # a later sync of the victim's own
    assert failed.returncode == 1 and "asks for a login" in failed.stderr
    assert not marker.exists()


def test_variables_that_name_a_config_file_or_a_program_are_never_forwarded(victim, tmp_path):
    config, marker = _planted_helper(tmp_path)
    for env in (
        {"GIT_CONFIG_GLOBAL": str(config)},
        {"XDG_CONFIG_HOME": str(tmp_path / "evil" / "xdg")},
        {"GIT_ASKPASS": str(tmp_path / "evil" / "askpass")},
        {"HOME": str(tmp_path / "evil")},
        {"DBUS_SESSION_BUS_ADDRESS": f"unixexec:path={tmp_path / 'evil' / 'bus'}"},
    ):
        for method in ("sync.run", "doctor.run"):
            answer = _socket_call(victim, method, {"env": env})
            assert answer["error"]["code"] == -32602, answer
            assert next(iter(env)) in answer["error"]["message"]
    # the user's own `thrum sync` with such a variable in its shell does not pass it along
    victim.env = {**victim.env, "GIT_CONFIG_GLOBAL": str(config), "XDG_CONFIG_HOME": str(tmp_path / "evil" / "xdg")}
    planted = victim.run("sync", check=False)
    assert planted.returncode == 1 and "asks for a login" in planted.stderr
    assert not marker.exists()


def test_a_login_passed_along_serves_only_the_sync_that_asked(victim):
    token_env = {**victim.env, "THRUM_GIT_TOKEN": "s3cret", "THRUM_GIT_USERNAME": "alice"}
    plain_env = dict(victim.env)
    victim.env = token_env
    report = victim.json("sync")
    assert report["ok"] and report["pushed"]
    assert victim.json("sync", "status")["credential_source"] == (
        "THRUM_GIT_TOKEN from the environment of `thrum sync` (user alice)"
    )
    victim.env = plain_env
    victim.json("send", "after the token was given", "--to", "@everyone", agent="alice")
    failed = victim.run("sync", check=False)  # a later sync from a shell without the token
    assert failed.returncode == 1 and "asks for a login and none is configured" in failed.stderr
    answer = _socket_call(victim, "sync.run", {})  # the daemon's own (timer) cycles
    assert "asks for a login and none is configured" in answer["error"]["message"]


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_another_user_on_a_loosened_socket_cannot_forward_credentials(victim):
    """The socket is born 0600; should its mode be loosened, the kernel's word on the
    peer's user id still keeps another user's variables out."""
    # A long repository path puts the socket in the shared /tmp/thrum-<uid>, which every
    # daemon starting beside this test makes 0700 again: the other user reaches the
    # socket through a link of it in a directory of this test's own.
    var = Path(tempfile.mkdtemp(prefix="thrum-door-", dir=victim.paths.socket.parent.parent))  # same filesystem
    os.link(victim.paths.socket, var / "daemon.sock")
    os.chmod(var, 0o711)
    os.chmod(var / "daemon.sock", 0o666)
    request = {"jsonrpc": "2.0", "id": 1, "method": "sync.run", "params": {"env": {"THRUM_GIT_TOKEN": "x"}}}
    dirfd = os.open(var, os.O_PATH)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the other user: connects through the directory handle, asks, reports
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(60)
                s.connect(f"/proc/self/fd/{dirfd}/daemon.sock")
                s.sendall(json.dumps(request).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            os.write(w, data)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(w, repr(exc).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.close(dirfd)
    with os.fdopen(r, "rb") as f:
        out = f.read()
    os.waitpid(pid, 0)
    shutil.rmtree(var)
    answer = json.loads(out)
    assert answer["error"]["code"] == -32002
    assert "another user" in answer["error"]["message"]
