"""Replica fixtures: a bare remote and clones, each clone a machine with its own daemon.

The remote is reached as ``remote_kind`` says: ``local`` (its path), ``http`` (smart
HTTP through git http-backend with Basic auth, the token in the environment) or
``ssh`` (OpenSSH's sshd on loopback, through a host alias in ``~/.ssh/config`` and a
key file, the host key in ``~/.ssh/known_hosts``). Tests that must hold over every
transport say ``@pytest.mark.parametrize("remote_kind", KINDS, indirect=True)``.

Tests of what the daemons' cycles decide, where neither a repository nor a transport
adds anything, use ``memory_machines`` instead: daemons in the test's own trio run,
their git stores in memory (`memory_fleet`).
"""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
import trio

from fixtures.repos.builders import clone, make_replicas
from fixtures.repos.fsck import fsck_each_repository, fsck_expect  # noqa: F401 - every test ends with git fsck --full
from fixtures.servers.pytest_fixtures import git_http, sshd  # noqa: F401
from fixtures.servers.sshd import SshClient
from memory_fleet import MemoryFleet
from replication_helpers import Machine, machine_env


@pytest.fixture
def remote_kind(request) -> str:
    return getattr(request, "param", "local")


class Fleet:
    """Factory of machines sharing one remote: ``fleet(n, **env)``; ``fleet.clone(dest)``."""

    def __init__(self, tmp_path: Path, kind: str, request):
        self.tmp_path = tmp_path
        self.kind = kind
        self.request = request
        self.made: list[Machine] = []
        self.env: dict[str, str] = {}
        self.remote: Path | None = None
        self.url: str | None = None
        self._server = None
        self._client: SshClient | None = None

    def _serve(self, base: Path) -> None:
        """Start the transport for the remote under ``base`` (once per fleet)."""
        if self.kind == "http":
            if self._server is None:
                self._server = self.request.getfixturevalue("git_http")(base, users={"alice": "s3cret"})
            self.url = self._server.url("remote.git")
            home = self.tmp_path / "home"
            home.mkdir(exist_ok=True)
            self.env = {"HOME": str(home), "THRUM_GIT_TOKEN": "s3cret", "THRUM_GIT_USERNAME": "alice"}
        elif self.kind == "ssh":
            if self._client is None:
                server = self.request.getfixturevalue("sshd")
                self._client = SshClient(self.tmp_path / "home", server).authorize().trust_host()
                self._client.alias("thrum-remote")
            self.url = f"thrum-remote:{base / 'remote.git'}"
            self.env = {"HOME": str(self._client.home)}
            self.env.pop("SSH_AUTH_SOCK", None)
        else:
            self.url = str(base / "remote.git")

    def __call__(self, n: int = 2, **env) -> list[Machine]:
        base = self.tmp_path / f"set{len(self.made)}"
        replicas = make_replicas(base, n)
        self.remote = replicas.remote
        self._serve(base)
        out = []
        for path in replicas.clones:
            pygit2.Repository(str(path)).remotes.set_url("origin", self.url)
            m_env = machine_env(**self.env, **env)
            if self.kind == "ssh":
                m_env.pop("SSH_AUTH_SOCK", None)
            out.append(Machine(path, m_env).init())
        self.made.extend(out)
        return out

    @property
    def ssh_client(self) -> SshClient | None:
        """The client side (HOME, key, agent) of an ``ssh`` fleet."""
        return self._client

    def clone(self, dest: Path, env: dict) -> Machine:
        """A machine that clones the remote later (origin on this fleet's transport)."""
        clone(self.remote, dest)
        pygit2.Repository(str(dest)).remotes.set_url("origin", self.url)
        m = Machine(dest, env).init()
        self.made.append(m)
        return m

    def stop(self) -> None:
        for m in self.made:
            try:
                m.stop()
            except Exception:
                pass
        if self._client is not None:
            self._client.stop()


@pytest.fixture
def machines(tmp_path, remote_kind, request):
    """Factory: machines(n, **env) -> list of initialised Machines (stopped at teardown)."""
    fleet = Fleet(tmp_path, remote_kind, request)
    yield fleet
    fleet.stop()


@pytest.fixture
async def memory_machines(tmp_path):
    """Factory: ``await memory_machines(n, **config)`` -> machines whose daemons run in this
    test's trio run and sync through one remote in memory (stopped at teardown)."""
    async with trio.open_nursery() as nursery:
        fleet = MemoryFleet(tmp_path, nursery)
        yield fleet
        fleet.stop()
