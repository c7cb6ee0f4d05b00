"""`thrum sync` against real remotes, as a user runs it: a token (or an ssh-agent) given
to `thrum sync` after the daemon started, a refused login, --quiet for cron, and
credentials written in the remote URL that never show up in output or state."""

from __future__ import annotations

import pygit2
import pytest

http_only = pytest.mark.parametrize("remote_kind", ["http"], indirect=True)


def _without_token(env: dict) -> dict:
    return {k: v for k, v in env.items() if k not in ("THRUM_GIT_TOKEN", "THRUM_GIT_USERNAME")}


@http_only
def test_a_token_given_to_thrum_sync_after_the_daemon_started_is_used(machines):
    a, b = machines(2)
    token_env = dict(a.env)
    a.env = _without_token(a.env)
    a.run("daemon", "restart")  # this daemon's own environment has no token
    a.agent("alice", "implementer")
    failed = a.run("sync", check=False)
    assert failed.returncode == 1 and "asks for a login and none is configured" in failed.stderr
    a.env = token_env  # the user exports THRUM_GIT_TOKEN and runs `thrum sync` again
    report = a.json("sync")
    assert report["ok"] and report["pushed"]
    status = a.json("sync", "status")
    assert status["credential_source"] == "THRUM_GIT_TOKEN from the environment of `thrum sync` (user alice)"
    assert b.sync()["received"] >= 1


@http_only
def test_a_refused_token_is_one_line_naming_remote_user_and_source(machines):
    a, b = machines(2)
    a.agent("alice", "implementer")
    sent = a.json("send", "while the token was wrong", "--to", "@everyone", agent="alice")
    good = dict(a.env)
    a.env = {**a.env, "THRUM_GIT_TOKEN": "wrong-token"}
    failed = a.run("sync", check=False)
    assert failed.returncode == 1 and failed.stdout == ""
    assert failed.stderr.count("\n") == 1 and failed.stderr.startswith("thrum: remote origin (http://127.0.0.1:")
    assert "refused THRUM_GIT_TOKEN from the environment of `thrum sync` for user alice" in failed.stderr
    assert "wrong-token" not in failed.stderr
    assert a.json("sync", "status")["last_error"].startswith("remote origin (")
    a.env = good
    assert a.sync()["ok"]
    b.sync()
    assert sent["message_id"] in [m["message_id"] for m in b.rpc("message.list", {"page_size": 50})["messages"]]


@http_only
def test_quiet_sync_prints_nothing_on_success_with_or_without_the_daemon(machines):
    (a,) = machines(1)
    a.agent("alice", "implementer")
    ok = a.run("sync", "--quiet")
    assert (ok.stdout, ok.stderr) == ("", "")
    a.stop()
    offline = a.run("sync", "--quiet")
    assert (offline.stdout, offline.stderr) == ("", "")
    a.env = {**a.env, "THRUM_GIT_TOKEN": "wrong-token"}
    failed = a.run("sync", "--quiet", check=False)
    assert failed.returncode == 1 and failed.stderr.startswith("thrum: ") and failed.stderr.count("\n") == 1


@http_only
def test_a_password_in_the_remote_url_is_never_shown_or_stored(machines):
    a, b = machines(2)
    url = pygit2.Repository(str(a.path)).remotes["origin"].url.replace("http://", "http://alice:s3cret@")
    a.env = {k: v for k, v in a.env.items() if k not in ("THRUM_GIT_TOKEN", "THRUM_GIT_USERNAME")}
    a.run("daemon", "stop")
    pygit2.Repository(str(a.path)).remotes.set_url("origin", url)
    a.agent("alice", "implementer")
    report = a.json("sync")
    assert report["ok"] and "s3cret" not in report["remote_url"] and "alice:***@" in report["remote_url"]
    status = a.run("sync", "status").stdout
    assert "alice:***@127.0.0.1" in status and "s3cret" not in status
    pygit2.Repository(str(a.path)).remotes.set_url("origin", url.replace("s3cret", "hunter22"))
    failed = a.run("sync", check=False)
    assert failed.returncode == 1 and "hunter22" not in failed.stderr
    for f in (a.paths.var / "sync-state.json", a.paths.var / "daemon.log"):
        text = f.read_text()
        assert "s3cret" not in text and "hunter22" not in text, f


@pytest.mark.parametrize("remote_kind", ["ssh"], indirect=True)
def test_an_ssh_agent_given_to_thrum_sync_serves_that_sync_of_a_daemon_started_without_one(machines):
    a, b = machines(2)
    client = machines.ssh_client
    client.move_key(client.home / "vault" / "key")  # no default key file left: only an agent can log in
    sock = client.start_agent()
    a.agent("alice", "implementer")
    failed = a.run("sync", check=False)  # neither the daemon nor this shell has an agent
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1
    assert "SSH login to remote origin (thrum-remote:" in failed.stderr and "no SSH key to offer" in failed.stderr
    assert f" on [127.0.0.1]:{client.server.port} failed" in failed.stderr  # where the alias really goes
    a.env = {**a.env, "SSH_AUTH_SOCK": sock}  # the user starts an agent in their shell
    report = a.json("sync")
    assert report["ok"] and report["pushed"]
    assert a.json("sync", "status")["credential_source"].startswith("ssh-agent")
    with_agent = dict(a.env)
    a.env = {k: v for k, v in a.env.items() if k != "SSH_AUTH_SOCK"}  # a later shell without the agent
    a.json("send", "after the agent was given", "--to", "@everyone", agent="alice")
    again = a.run("sync", check=False)  # the agent served the sync that passed it along, no other
    assert again.returncode == 1 and "no SSH key to offer" in again.stderr
    a.env = with_agent
    assert a.json("sync")["sent"] >= 1
    b.env = {**b.env, "SSH_AUTH_SOCK": sock}
    assert b.sync()["received"] >= 2
