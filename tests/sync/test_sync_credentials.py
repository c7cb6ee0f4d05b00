"""Credentials: from the environment, and a remote that refuses them (a real HTTP server)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pygit2
import pytest

from fixtures.repos.builders import make_repo
from sync_helpers import append, event
from thrum.sync import AuthError
from thrum.sync.replicate import Credentials, Replicator, credentials_from_env, run_cycle
from thrum.sync.worktree import SYNC_REF, ensure_sync_worktree


def test_credentials_from_env_token_defaults_username():
    creds = credentials_from_env(environ={"THRUM_GIT_TOKEN": "t0k"})
    assert (creds.https_token, creds.https_username) == ("t0k", "x-access-token")
    assert creds.ssh_key_path is None and creds.use_ssh_agent


def test_credentials_from_env_explicit_username_and_ssh_key():
    creds = credentials_from_env(
        {"ssh_key": "/cfg/key", "https_username": "cfg-user"},
        environ={"THRUM_GIT_TOKEN": "t", "THRUM_GIT_USERNAME": "env-user", "THRUM_SSH_KEY": "~/k"},
    )
    assert creds.https_username == "env-user"
    assert creds.ssh_key_path.endswith("/k") and not creds.ssh_key_path.startswith("~")


def test_credentials_from_env_config_only():
    creds = credentials_from_env({"ssh_key": "/cfg/key", "https_username": "cfg-user"}, environ={})
    assert (creds.ssh_key_path, creds.https_username, creds.https_token) == ("/cfg/key", "cfg-user", None)


def test_credentials_repr_hides_the_token():
    assert "s3cret" not in repr(Credentials(https_token="s3cret"))


class _Refuse(BaseHTTPRequestHandler):
    """A git HTTP server that refuses every request with 401 and counts them."""

    def do_GET(self):  # noqa: N802
        self.server.hits.append(self.headers.get("Authorization"))
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def refusing_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    server.hits = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def http_replica(tmp_path, refusing_server):
    repo = make_repo(tmp_path / "r")
    url = f"http://127.0.0.1:{refusing_server.server_address[1]}/team.git"
    repo.remotes.create("origin", url)
    wt = ensure_sync_worktree(tmp_path / "r")  # remote refuses: branch created locally
    return wt, url


def test_fetch_with_bad_token_fails_once_and_fast(http_replica, refusing_server):
    wt, url = http_replica
    replicator = Replicator(wt, credentials=Credentials(https_token="wrong"))
    start = time.monotonic()
    with pytest.raises(AuthError) as info:
        replicator.fetch()
    assert time.monotonic() - start < 5
    assert str(info.value).startswith(f"authentication to {url}")
    assert "rejected" in str(info.value)
    tries_with_token = [h for h in refusing_server.hits if h]
    assert len(tries_with_token) == 1  # the callback gave up instead of looping


def test_fetch_without_credentials_says_what_to_set(http_replica):
    wt, _ = http_replica
    with pytest.raises(AuthError, match="THRUM_GIT_TOKEN"):
        Replicator(wt, credentials=Credentials()).fetch()


def test_run_cycle_auth_failure_keeps_the_local_commit(http_replica):
    wt, _ = http_replica
    replicator = Replicator(wt, credentials=Credentials(https_token="wrong"))
    append(wt, "events/000001.jsonl", event("01A"))
    with pytest.raises(AuthError):
        run_cycle(replicator, threading.Lock)
    committed = replicator.repo.revparse_single(f"{SYNC_REF}:events/000001.jsonl")
    assert isinstance(committed, pygit2.Blob) and committed.data == event("01A")
