"""Remote URLs as users write them, ~/.ssh/config host aliases and known_hosts lines
(pure: no network)."""

from __future__ import annotations

import base64
import getpass
import hashlib
import hmac

import pytest

from thrum.sync import SyncError
from thrum.sync.transport.ssh import known_host_entries, resolve_host
from thrum.sync.transport.urls import parse_url, redact_text, redact_url, resolve_url


def test_url_kinds_follow_gits_rules(tmp_path):
    assert parse_url("git@github.com:team/repo.git").kind == "ssh"
    scp = parse_url("git@github.com:team/repo.git")
    assert (scp.user, scp.host, scp.path, scp.scp) == ("git", "github.com", "team/repo.git", True)
    assert parse_url("ssh://git@host:2222/srv/repo.git").port == 2222
    assert parse_url("https://gitlab.com/team/repo.git").kind == "http"
    assert parse_url("file:///srv/repo.git").path == "/srv/repo.git"
    assert parse_url("../remote.git", tmp_path / "work").path == str(tmp_path / "remote.git")
    assert parse_url("./a:b/remote.git").kind == "local"  # a slash before the colon: a path


def test_relative_paths_resolve_against_the_checkout_not_the_current_directory(tmp_path):
    assert resolve_url("../remote.git", tmp_path / "clone") == str(tmp_path / "remote.git")
    for url in ("https://h/r.git", "git@h:r.git", "file:///srv/r.git", "/abs/r.git"):
        assert resolve_url(url, tmp_path) == url


def test_credentials_in_urls_are_redacted_everywhere():
    assert redact_url("https://alice:s3cret@host/r.git") == "https://alice:***@host/r.git"
    assert (
        redact_url("https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/t/r.git")
        == "https://***@github.com/t/r.git"
    )
    assert redact_url("https://git@host/r.git") == "https://git@host/r.git"
    assert redact_url("git@github.com:team/repo.git") == "git@github.com:team/repo.git"
    text = "error: failed for https://x-access-token:glpat-123456@gitlab.com/t/r.git: 401"
    assert "glpat-123456" not in redact_text(text)
    assert redact_text("token tok-9876 leaked", "tok-9876") == "token *** leaked"


def _config(tmp_path, text):
    ssh = tmp_path / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "config").write_text(text)
    return [str(ssh / "config")]


def test_a_host_alias_gives_hostname_port_user_and_identity_files(tmp_path):
    _config(
        tmp_path,
        """
Host work-git
    HostName git.corp.example
    Port 2222
    User gitsvc
    IdentityFile ~/.ssh/work_%h
    IdentitiesOnly yes
Host *.corp.example !secret.corp.example
    User corpuser
Host *
    IdentityFile ~/.ssh/fallback
    Port 2200
""",
    )
    t = resolve_host("work-git", home=tmp_path)
    assert (t.hostname, t.port, t.user, t.identities_only) == ("git.corp.example", 2222, "gitsvc", True)
    assert t.identity_files == [f"{tmp_path}/.ssh/work_git.corp.example", f"{tmp_path}/.ssh/fallback"]
    u = resolve_host("x.corp.example", url_user="git", url_port=22, home=tmp_path)
    assert (u.hostname, u.port, u.user) == ("x.corp.example", 22, "git")  # the URL's user and port win
    s = resolve_host("secret.corp.example", home=tmp_path)
    assert (s.user, s.port) == (getpass.getuser(), 2200)  # negated pattern: not that block; the login name


def test_include_and_match_blocks(tmp_path):
    _config(
        tmp_path, f'Include {tmp_path}/.ssh/conf.d/*.conf\nMatch exec "false"\n    User never\nHost *\n    User last\n'
    )
    (tmp_path / ".ssh" / "conf.d").mkdir()
    (tmp_path / ".ssh" / "conf.d" / "a.conf").write_text("Host gh\n    HostName github.com\n    User git\n")
    t = resolve_host("gh", home=tmp_path)
    assert (t.hostname, t.user) == ("github.com", "git")
    assert resolve_host("other", home=tmp_path).user == "last"


def test_openssh_itself_evaluates_the_config_match_forms_included(tmp_path):
    """``ssh -G`` answers: the Match forms a home-made parser skipped (exec, final,
    canonical) count as OpenSSH counts them."""
    _config(
        tmp_path,
        'Match host gh exec "true"\n    User viaexec\n    IdentityFile ~/.ssh/k_%n\n'
        "Match final host github.com\n    Port 2022\n"
        "Host gh\n    HostName github.com\n",
    )
    t = resolve_host("gh", home=tmp_path)
    assert (t.hostname, t.user, t.port) == ("github.com", "viaexec", 2022)
    assert t.identity_files == [f"{tmp_path}/.ssh/k_gh"]
    assert resolve_host("plain.example", home=tmp_path).identity_files == []  # OpenSSH's defaults: none configured


def test_a_host_that_is_not_a_host_never_reaches_ssh_and_a_broken_config_says_so(tmp_path):
    for bad in ("-oProxyCommand=touch x", "a b", "", "h\nost"):
        with pytest.raises(SyncError, match="not an SSH host name"):
            resolve_host(bad, home=tmp_path)
    _config(tmp_path, "Host *\n    NoSuchOption yes\n")
    with pytest.raises(SyncError) as refused:
        resolve_host("broken.example", home=tmp_path)
    assert "ssh -G broken.example" in str(refused.value) and "\n" not in str(refused.value)


def test_without_ssh_on_path_the_url_is_used_as_written(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    t = resolve_host("git.example", url_user="git", url_port=2200, home=tmp_path)
    assert (t.hostname, t.user, t.port, t.identity_files) == ("git.example", "git", 2200, [])


def test_known_hosts_lines_match_plain_hashed_and_bracketed_names(tmp_path):
    salt = b"0123456789abcdef0123"
    hashed = base64.b64encode(hmac.new(salt, b"[10.0.0.5]:2222", hashlib.sha1).digest()).decode()
    kh = tmp_path / "known_hosts"
    kh.write_text(
        "# comment\n"
        "github.com,140.82.121.3 ssh-ed25519 AAAAC3Nza\n"
        f"|1|{base64.b64encode(salt).decode()}|{hashed} ssh-ed25519 AAAAC3Nzb\n"
        "@revoked badhost ssh-rsa AAAAB3\n"
        "*.corp.example,!evil.corp.example ecdsa-sha2-nistp256 AAAAE2\n"
    )
    assert known_host_entries("github.com", 22, [str(kh)]) == [(str(kh), 2, "ssh-ed25519")]
    assert known_host_entries("10.0.0.5", 2222, [str(kh)]) == [(str(kh), 3, "ssh-ed25519")]
    assert known_host_entries("10.0.0.5", 22, [str(kh)]) == []
    assert known_host_entries("badhost", 22, [str(kh)]) == []
    assert len(known_host_entries("a.corp.example", 22, [str(kh)])) == 1
    assert known_host_entries("evil.corp.example", 22, [str(kh)]) == []
