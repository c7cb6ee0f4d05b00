"""Sync over SSH against a real OpenSSH server on loopback: key files, ssh-agent,
``~/.ssh/config`` host aliases, and host keys checked against ``~/.ssh/known_hosts``."""

from __future__ import annotations

import subprocess

import pygit2
import pytest

from fixtures.servers.pytest_fixtures import sshd  # noqa: F401
from fixtures.servers.sshd import SshClient
from remote_helpers import net_cluster
from sync_helpers import append, event, keys_of
from thrum.sync import AuthError
from thrum.sync.transport.credentials import credentials_from_env
from thrum.sync.transport.failures import HostKeyRefused

SHARD = "messages/alice/000001.jsonl"


@pytest.fixture
def client(tmp_path, sshd):  # noqa: F811
    """A HOME with a key pair; libgit2 reads ``known_hosts`` from there during the test."""
    c = SshClient(tmp_path / "home", sshd)
    saved = pygit2.settings.homedir
    pygit2.settings.homedir = str(c.home)
    yield c
    pygit2.settings.homedir = saved
    c.stop()


def _creds(client):
    return credentials_from_env({}, environ=client.env())


def _pair(tmp_path, client, url_of=None):
    url_of = url_of or client.server.url
    return net_cluster(tmp_path / "set", 2, url_of, _creds(client))


def test_two_clones_sync_over_ssh_with_the_default_key_file(tmp_path, client):
    client.authorize().trust_host()
    c = _pair(tmp_path, client)
    append(c.a.worktree, SHARD, event("01A1"), event("01A2"))
    assert c.a.sync().pushed
    assert c.b.sync().received == 2
    assert c.a.read(SHARD) == c.b.read(SHARD)
    assert (
        c.a.replicator.credentials.last_source
        == f"key ~/.ssh/id_ed25519 (default key file) (user {client.server.user})"
    )


def test_a_key_held_by_ssh_agent_is_used(tmp_path, client):
    client.authorize().trust_host()
    client.move_key(client.home / "elsewhere" / "work_key")  # not a default key file: only the agent has it
    client.start_agent()
    c = _pair(tmp_path, client)
    append(c.a.worktree, SHARD, event("01A1"))
    assert c.a.sync().pushed
    assert c.b.sync().received == 1
    assert c.a.replicator.credentials.last_source.startswith("ssh-agent")


def test_a_host_alias_from_ssh_config_gives_host_port_user_and_key(tmp_path, client):
    client.authorize().trust_host()
    key = client.move_key(client.home / "keys" / "thrum_key")
    client.alias("teamgit", identity="~/keys/thrum_key")
    c = _pair(tmp_path, client, url_of=lambda remote: f"teamgit:{remote}")  # scp-like, as GitHub URLs are
    append(c.a.worktree, SHARD, event("01A1"))
    assert c.a.sync().pushed
    assert c.b.sync().received == 1
    assert (
        c.a.replicator.credentials.last_source
        == f"key ~/keys/thrum_key (IdentityFile in ~/.ssh/config) (user {client.server.user})"
    )
    assert key.exists()


def test_an_unknown_host_key_is_refused_with_what_to_run(tmp_path, client):
    client.authorize()  # known_hosts is empty
    c = net_cluster(tmp_path / "set", 1, client.server.url, _creds(client))
    append(c.a.worktree, SHARD, event("01A1"))
    with pytest.raises(HostKeyRefused) as info:
        c.a.sync()
    port = client.server.port
    msg = str(info.value)
    assert f"[127.0.0.1]:{port} is not in ~/.ssh/known_hosts" in msg
    assert f"`ssh -p {port} {client.server.user}@127.0.0.1`" in msg and "\n" not in msg
    assert pygit2.Repository(str(c.remote)).references.get("refs/heads/a-sync") is None  # nothing was pushed


def test_a_changed_host_key_is_refused_with_what_to_run(tmp_path, client):
    client.authorize()
    other = tmp_path / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    forged = " ".join((other.with_suffix(".pub")).read_text().split()[:2])
    client.trust_host(f"[127.0.0.1]:{client.server.port} {forged}")
    c = net_cluster(tmp_path / "set", 1, client.server.url, _creds(client))
    with pytest.raises(HostKeyRefused) as info:
        c.a.sync()
    msg = str(info.value)
    assert "does not match ~/.ssh/known_hosts (line 1)" in msg
    assert f"ssh-keygen -R '[127.0.0.1]:{client.server.port}'" in msg


def test_a_hashed_known_hosts_entry_is_accepted(tmp_path, client):
    client.authorize().trust_host()
    subprocess.run(
        ["ssh-keygen", "-q", "-H", "-f", str(client.ssh / "known_hosts")], check=True, capture_output=True
    )  # Debian's default: HashKnownHosts yes
    assert "127.0.0.1" not in (client.ssh / "known_hosts").read_text()
    c = net_cluster(tmp_path / "set", 1, client.server.url, _creds(client))
    append(c.a.worktree, SHARD, event("01A1"))
    assert c.a.sync().pushed


def test_a_key_the_server_refuses_is_one_line_naming_what_was_tried(tmp_path, client):
    client.trust_host()  # key not authorized
    c = net_cluster(tmp_path / "set", 1, client.server.url, _creds(client))
    with pytest.raises(AuthError) as info:
        c.a.sync()
    msg = str(info.value)
    assert msg.startswith(f"SSH login to remote origin (ssh://{client.server.user}@127.0.0.1:")
    assert "the server refused key ~/.ssh/id_ed25519 (default key file)" in msg and "\n" not in msg


def test_an_encrypted_key_file_is_skipped_with_a_hint(tmp_path, client):
    client.trust_host()
    client.key.unlink()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "passphrase", "-f", str(client.key)],
        check=True,
        capture_output=True,
        input=b"y\n",
    )
    client.authorize()
    c = net_cluster(tmp_path / "set", 1, client.server.url, _creds(client))
    with pytest.raises(AuthError, match=r"skipped ~/.ssh/id_ed25519 encrypted \(load it into ssh-agent"):
        c.a.sync()
    client.start_agent(add_key=False)
    subprocess.run(
        ["ssh-add", "-q", str(client.key)],
        env={**client.env(), "SSH_ASKPASS_REQUIRE": "force", "SSH_ASKPASS": str(_askpass(tmp_path)), "DISPLAY": ":0"},
        check=True,
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    c.a.replicator.credentials = _creds(client)
    append(c.a.worktree, SHARD, event("01A1"))
    assert c.a.sync().pushed
    assert keys_of(c.a.read(SHARD)) == keys_of(event("01A1"))


def _askpass(tmp_path):
    script = tmp_path / "askpass.sh"
    script.write_text("#!/bin/sh\necho passphrase\n")
    script.chmod(0o700)
    return script
