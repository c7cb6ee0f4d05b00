"""Sync through a real smart-HTTP server (git http-backend with Basic auth on loopback):
logins from the environment and from git's credential helpers, refused logins, a
server that goes away or never answers, and credentials in URLs never shown."""

from __future__ import annotations

import threading

import pygit2
import pytest

from fixtures.servers.pytest_fixtures import git_http  # noqa: F401
from fixtures.servers.tcp import SilentServer
from remote_helpers import net_cluster, set_origin
from sync_helpers import append, assert_linear_single_root, event, keys_of
from thrum.sync import AuthError, RemoteUnreachable, SyncError
from thrum.sync.cycle import run_cycle
from thrum.sync.replicate import Replicator
from thrum.sync.transport.callbacks import remote_callbacks
from thrum.sync.transport.credentials import Credentials, credentials_from_env
from thrum.sync.worktree import SYNC_REF, ensure_sync_worktree

SHARD = "messages/alice/000001.jsonl"


def _home(tmp_path, helper_line: str | None = None):
    """A HOME for git's credential helpers: ``store`` with one line, or no helper at all."""
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    if helper_line is not None:
        (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
        (home / ".git-credentials").write_text(helper_line + "\n")
    return home


def _creds(home, **env) -> Credentials:
    return credentials_from_env({}, environ={"HOME": str(home), "PATH": "/usr/bin:/bin", **env})


@pytest.fixture
def served(tmp_path, git_http):  # noqa: F811
    server = git_http(tmp_path / "srv", users={"alice": "s3cret"})
    return server


def test_two_clones_sync_through_smart_http_with_a_token_from_the_environment(tmp_path, served):
    creds = _creds(_home(tmp_path), THRUM_GIT_TOKEN="s3cret", THRUM_GIT_USERNAME="alice")
    c = net_cluster(tmp_path / "srv", 2, lambda remote: served.url("remote.git"), creds)
    append(c.a.worktree, SHARD, event("01A1"), event("01A2"))
    append(c.b.worktree, SHARD, event("01B1"))
    assert c.a.sync().pushed
    report = c.b.sync()
    assert report.pushed and report.received == 2
    c.a.sync()
    assert c.a.read(SHARD) == c.b.read(SHARD) and len(keys_of(c.a.read(SHARD))) == 3
    assert_linear_single_root(c.remote)
    assert creds.last_source == "THRUM_GIT_TOKEN from the environment (user alice)"
    served.reset_stats()
    again = c.a.sync()  # nothing new on either side: one ref advertisement, no pack negotiation
    assert again.pushed and again.received == 0
    assert served.stats()["posts"] == 0


def test_a_conversation_turn_over_http_is_five_requests(tmp_path, served):
    """Conversations at seconds (issue 30): a sender whose branch only adds to the remote's
    tip pushes first (one advertisement, one upload: no fetch before it), a login the
    server accepted is sent with the first request of the next operation (no 401 round
    trip each time), and the receiver's look is one request, its fetch two. Before: ten."""
    from thrum.sync.remoteview import RemoteView

    creds = _creds(_home(tmp_path), THRUM_GIT_TOKEN="s3cret", THRUM_GIT_USERNAME="alice")
    c = net_cluster(tmp_path / "srv", 2, lambda remote: served.url("remote.git"), creds)
    append(c.a.worktree, SHARD, event("01A1"))
    c.a.sync()
    c.b.sync()
    look = RemoteView(c.b.worktree)
    for i in range(2):
        served.reset_stats()
        append(c.a.worktree, SHARD, event(f"01C{i}"))
        sent = c.a.sync()
        assert sent.pushed and sent.sent == 1 and "fetch" not in sent.phases
        assert (served.stats()["requests"], served.stats()["posts"], served.stats()["unauthorized"]) == (2, 1, 0)
        served.reset_stats()
        assert look.tip(creds) == c.a.replicator.head_id()
        assert served.stats()["requests"] == 1
        served.reset_stats()
        assert c.b.sync().received == 1
        assert (served.stats()["requests"], served.stats()["unauthorized"]) == (2, 0)
    assert c.a.read(SHARD) == c.b.read(SHARD)
    assert_linear_single_root(c.remote)


def test_a_login_sent_at_once_and_refused_now_is_one_clear_error_then_forgotten(tmp_path, served):
    """The login a server accepted is sent with the next operation's first request; when
    the server has stopped taking it (a revoked token), the operation fails with the one
    line of a refused login, and the next one waits for the server's challenge again."""
    creds = _creds(_home(tmp_path), THRUM_GIT_TOKEN="s3cret", THRUM_GIT_USERNAME="alice")
    c = net_cluster(tmp_path / "srv", 2, lambda remote: served.url("remote.git"), creds)
    append(c.a.worktree, SHARD, event("01A1"))
    assert c.a.sync().pushed
    served.users["alice"] = "rotated"  # the token is revoked on the server
    append(c.a.worktree, SHARD, event("01A2"))
    with pytest.raises(AuthError) as info:
        c.a.sync()
    msg = str(info.value)
    assert "\n" not in msg and "refused THRUM_GIT_TOKEN from the environment for user alice" in msg, msg
    served.users["alice"] = "s3cret"
    served.reset_stats()
    assert c.a.sync().pushed
    assert served.stats()["unauthorized"] >= 1  # challenged again (the refused login was forgotten)
    served.reset_stats()
    append(c.a.worktree, SHARD, event("01A3"))
    assert c.a.sync().pushed and served.stats()["unauthorized"] == 0


def test_a_login_from_gits_credential_helper_is_used_and_approved(tmp_path, served):
    home = _home(tmp_path, f"http://alice:s3cret@127.0.0.1:{served.port}")
    creds = _creds(home)  # no THRUM_GIT_TOKEN: git's `store` helper has the login
    c = net_cluster(tmp_path / "srv", 2, lambda remote: served.url("remote.git"), creds)
    append(c.a.worktree, SHARD, event("01A1"))
    assert c.a.sync().pushed
    assert c.b.sync().received == 1
    assert creds.last_source == "git's credential helper (user alice)"
    assert served.stats()["refused_logins"] == 0


def test_a_refused_token_is_one_clear_error_and_nothing_is_lost(tmp_path, served):
    good = _creds(_home(tmp_path), THRUM_GIT_TOKEN="s3cret", THRUM_GIT_USERNAME="alice")
    c = net_cluster(tmp_path / "srv", 2, lambda remote: served.url("remote.git"), good)
    wrong = _creds(_home(tmp_path), THRUM_GIT_TOKEN="expired", THRUM_GIT_USERNAME="alice")
    c.a.replicator.credentials = wrong
    append(c.a.worktree, SHARD, event("01A1"), event("01A2"))
    served.reset_stats()
    with pytest.raises(AuthError) as info:
        c.a.sync()
    msg = str(info.value)
    assert "\n" not in msg and "expired" not in msg
    assert f"remote origin (http://127.0.0.1:{served.port}/remote.git)" in msg
    assert "THRUM_GIT_TOKEN from the environment" in msg and "user alice" in msg
    assert served.stats()["refused_logins"] == 1, served.records  # tried once, no retry loop
    committed = c.a.replicator.store.repo.revparse_single(f"{SYNC_REF}:{SHARD}")
    assert keys_of(committed.data) == keys_of(event("01A1") + event("01A2"))  # the local commit is kept
    c.a.replicator.credentials = good
    assert c.a.sync().pushed
    assert c.b.sync().received == 2


def test_a_refused_login_from_the_helper_is_rejected_so_the_helper_forgets_it(tmp_path, served):
    home = _home(tmp_path, f"http://alice:stale@127.0.0.1:{served.port}")
    creds = _creds(home)
    pair_creds = _creds(_home(tmp_path / "ok"), THRUM_GIT_TOKEN="s3cret", THRUM_GIT_USERNAME="alice")
    c = net_cluster(tmp_path / "srv", 1, lambda remote: served.url("remote.git"), pair_creds)
    c.a.replicator.credentials = creds
    append(c.a.worktree, SHARD, event("01A1"))
    with pytest.raises(AuthError) as info:
        c.a.sync()
    msg = str(info.value)
    assert "git's credential helper" in msg and "user alice" in msg and "stale" not in msg
    assert "stale" not in (home / ".git-credentials").read_text()  # `git credential reject` erased it


def test_no_login_configured_says_what_to_do(tmp_path, served):
    c = net_cluster(tmp_path / "srv", 1, lambda remote: served.url("remote.git"), _creds(_home(tmp_path)))
    with pytest.raises(
        AuthError,
        match=r"asks for a login and none is configured: set THRUM_GIT_TOKEN, or set up "
        r"git's credential helper",
    ):
        c.a.sync()


def test_credentials_in_the_remote_url_work_and_are_never_shown(tmp_path, served):
    creds = _creds(_home(tmp_path))
    c = net_cluster(tmp_path / "srv", 1, lambda remote: served.url("remote.git", "alice", "s3cret"), creds)
    append(c.a.worktree, SHARD, event("01A1"))
    report = c.a.sync()
    assert report.pushed
    assert report.remote_url == f"http://alice:***@127.0.0.1:{served.port}/remote.git"
    assert c.a.replicator.remote_url() == report.remote_url
    set_origin(c.a.repo, served.url("remote.git", "alice", "hunter22"))
    append(c.a.worktree, SHARD, event("01A2"))
    with pytest.raises(AuthError) as info:
        c.a.sync()
    assert "hunter22" not in str(info.value) and "password written in the remote URL" in str(info.value)


def test_the_server_going_away_mid_sync_loses_nothing(tmp_path, served):
    creds = _creds(_home(tmp_path), THRUM_GIT_TOKEN="s3cret", THRUM_GIT_USERNAME="alice")
    c = net_cluster(tmp_path / "srv", 2, lambda remote: served.url("remote.git"), creds)
    append(c.a.worktree, SHARD, event("01A1"))
    served.drop_next(1, method="POST")  # the first pack exchange: the connection just closes
    with pytest.raises(SyncError) as info:
        c.a.sync()
    assert not isinstance(info.value, AuthError) and "\n" not in str(info.value)
    assert str(info.value).startswith("remote origin (")
    served.stop()
    append(c.a.worktree, SHARD, event("01A2"))
    with pytest.raises(RemoteUnreachable):
        c.a.sync()
    assert keys_of(c.a.read(SHARD)) == keys_of(event("01A1") + event("01A2"))
    served.start()  # back on a new port
    for r in c.replicas:
        set_origin(r.repo, served.url("remote.git"))
    assert c.a.sync().pushed
    assert c.b.sync().received == 2


def test_a_remote_that_never_answers_fails_after_the_configured_timeout(tmp_path):
    pair_home = _home(tmp_path)
    with SilentServer() as silent:
        from fixtures.repos.builders import make_repo

        repo = make_repo(tmp_path / "r")
        repo.remotes.create("origin", f"http://127.0.0.1:{silent.port}/team.git")
        creds = _creds(pair_home, THRUM_GIT_TOKEN="x")
        creds.timeout_s = 1.0
        wt = ensure_sync_worktree(tmp_path / "r", callbacks=remote_callbacks(creds))
        replicator = Replicator(wt, credentials=creds)
        with pytest.raises(RemoteUnreachable) as info:
            replicator.fetch()  # the 1 s asked for, not the default 60 s: the error says which it was
        assert "did not answer within 1 s" in str(info.value) and "THRUM_NET_TIMEOUT" in str(info.value)
        assert silent.accepted >= 1


def test_racing_pushes_over_http_are_retried_not_reported(tmp_path, served):
    creds = _creds(_home(tmp_path), THRUM_GIT_TOKEN="s3cret", THRUM_GIT_USERNAME="alice")
    c = net_cluster(tmp_path / "srv", 3, lambda remote: served.url("remote.git"), creds)
    for i, r in enumerate(c.replicas):
        append(r.worktree, f"messages/agent{i}/000001.jsonl", *(event(f"01R{i}{k}", f"agent{i}") for k in range(3)))
    reports, errors = [], []

    def run(r):
        try:
            reports.append(run_cycle(r.replicator, r.files, backoff_s=0.02))
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(r,)) for r in c.replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and all(r.pushed and r.error is None for r in reports)
    for r in c.replicas:
        r.sync()
    shards = [{p: r.read(p) for p in (f"messages/agent{i}/000001.jsonl" for i in range(3))} for r in c.replicas]
    assert shards[0] == shards[1] == shards[2]
    remote_tip = pygit2.Repository(str(c.remote)).references[SYNC_REF].target
    assert remote_tip == c.a.replicator.store.repo.references[SYNC_REF].target
