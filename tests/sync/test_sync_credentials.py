"""Where logins come from (config, this process's environment, what `thrum sync` passed
along, git's credential helpers), key files libssh2 cannot use, and one-line errors.
The logins against real servers are in test_sync_http.py and test_sync_ssh.py."""

from __future__ import annotations

import socket
import subprocess

import pygit2
import pytest

from thrum.sync import AuthError, RemoteUnreachable
from thrum.sync.transport import gitcredential
from thrum.sync.transport.credentials import Credentials, credentials_from_env, key_file_problem
from thrum.sync.transport.failures import translate


def test_a_token_passed_along_by_thrum_sync_wins_over_the_daemons_own():
    creds = credentials_from_env(
        {}, environ={"THRUM_GIT_TOKEN": "old"}, forwarded={"THRUM_GIT_TOKEN": "new"}, own="the daemon's environment"
    )
    assert creds.https_token == "new"
    assert creds.token_source == "THRUM_GIT_TOKEN from the environment of `thrum sync`"
    daemon_only = credentials_from_env({}, environ={"THRUM_GIT_TOKEN": "old"}, own="the daemon's environment")
    assert daemon_only.https_token == "old"
    assert daemon_only.token_source == "THRUM_GIT_TOKEN from the daemon's environment"


def test_environment_wins_over_config_and_the_username_is_only_set_when_given():
    creds = credentials_from_env(
        {"ssh_key": "/cfg/key", "https_username": "cfg-user", "net_timeout": 5},
        environ={"THRUM_GIT_TOKEN": "t", "THRUM_GIT_USERNAME": "env-user", "THRUM_SSH_KEY": "~/k"},
    )
    assert creds.https_username == "env-user" and creds.timeout_s == 5
    assert creds.ssh_key_path.endswith("/k") and not creds.ssh_key_path.startswith("~")
    cfg_only = credentials_from_env({"ssh_key": "/cfg/key", "https_username": "cfg-user"}, environ={})
    assert (cfg_only.ssh_key_path, cfg_only.https_username, cfg_only.https_token) == ("/cfg/key", "cfg-user", None)
    assert cfg_only.ssh_key_source == '"ssh_key" in .thrum/config.json'
    # no username given: the callback uses the URL's user, else x-access-token
    assert credentials_from_env({}, environ={"THRUM_GIT_TOKEN": "t"}).https_username is None


def test_a_dead_agent_socket_passed_along_does_not_replace_a_live_one(tmp_path):
    live = tmp_path / "live.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(live))
    try:
        creds = credentials_from_env(
            {}, environ={"SSH_AUTH_SOCK": str(live)}, forwarded={"SSH_AUTH_SOCK": str(tmp_path / "gone.sock")}
        )
        assert creds.ssh_auth_sock() == str(live)
        fresh = credentials_from_env(
            {}, environ={"SSH_AUTH_SOCK": str(tmp_path / "gone.sock")}, forwarded={"SSH_AUTH_SOCK": str(live)}
        )
        assert fresh.ssh_auth_sock() == str(live)
    finally:
        s.close()


def test_labels_name_the_process_that_passed_each_variable_along():
    creds = credentials_from_env(
        {},
        environ={},
        forwarded={"THRUM_GIT_TOKEN": "t", "THRUM_SSH_KEY": "/k"},
        passed="the environment of `thrum sync`",
        passed_by={"THRUM_SSH_KEY": "the environment of `thrum doctor`"},
    )
    assert creds.token_source == "THRUM_GIT_TOKEN from the environment of `thrum sync`"
    assert creds.ssh_key_source == "THRUM_SSH_KEY from the environment of `thrum doctor`"


def test_credentials_repr_hides_the_token():
    assert "s3cret" not in repr(Credentials(https_token="s3cret"))


def _keygen(path, passphrase=""):
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path)], check=True, capture_output=True
    )


def test_key_files_libssh2_cannot_use_are_recognised(tmp_path):
    _keygen(tmp_path / "plain")
    _keygen(tmp_path / "locked", "passphrase")
    assert key_file_problem(str(tmp_path / "plain")) is None
    assert key_file_problem(str(tmp_path / "locked")).startswith("encrypted (load it into ssh-agent")
    assert key_file_problem(str(tmp_path / "locked"), passphrase="passphrase") is None
    pem = tmp_path / "old.pem"
    pem.write_text(
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n"
        "-----END RSA PRIVATE KEY-----\n"
    )
    assert key_file_problem(str(pem)).startswith("encrypted")
    assert key_file_problem(str(tmp_path / "missing")).startswith("cannot be read")


@pytest.fixture
def helper_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    (home / ".git-credentials").write_text("https://bob:tok-123@git.example.com\n")
    return {"HOME": str(home), "PATH": "/usr/bin:/bin"}


def test_git_credential_fill_approve_and_reject_talk_to_the_users_helpers(helper_home, tmp_path):
    if gitcredential.git_executable() is None:
        pytest.skip("git is not installed")
    cred = gitcredential.fill("https", "git.example.com", "team/repo.git", env=helper_home)
    assert (cred.username, cred.password) == ("bob", "tok-123") and "tok-123" not in repr(cred)
    assert gitcredential.fill("https", "other.example.com", env=helper_home) is None  # no prompt, no hang
    gitcredential.reject(cred, env=helper_home)
    stored = (tmp_path / "home" / ".git-credentials").read_text()
    assert "tok-123" not in stored
    gitcredential.approve(
        gitcredential.GitCredential(
            "bob", "tok-456", {"protocol": "https", "host": "git.example.com", "username": "bob", "password": "tok-456"}
        ),
        env=helper_home,
    )
    assert gitcredential.fill("https", "git.example.com", env=helper_home).password == "tok-456"


def test_errors_are_one_line_name_the_remote_and_hide_credentials():
    url = "https://alice:hunter22@git.example.com/team/repo.git"
    err = translate(
        pygit2.GitError(
            "failed to resolve address for alice:hunter22@git.example.com: Name or service not known\nmore"
        ),
        "origin",
        url,
    )
    assert isinstance(err, RemoteUnreachable)
    assert "hunter22" not in str(err) and "\n" not in str(err)
    assert str(err).startswith("remote origin (https://alice:***@git.example.com/team/repo.git) is unreachable")
    slow = translate(pygit2.GitError("timed out"), "origin", "https://h/r.git", timeout_s=7)
    assert "did not answer within 7 s" in str(slow) and "THRUM_NET_TIMEOUT" in str(slow)
    denied = translate(pygit2.GitError("unexpected http status code: 403"), "origin", "https://h/r.git")
    assert isinstance(denied, AuthError) and "HTTP 403" in str(denied)
