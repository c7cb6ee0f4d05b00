"""Fixtures for CLI unit tests: a fake repository (no git objects needed), a
fake daemon on its socket, and a helper that runs the CLI in-process."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from thrum import paths as thrum_paths

from cli_fake_daemon import FakeDaemon
from cli_helpers import write_identity
from cli_replies import marked


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "r"
    (root / ".git").mkdir(parents=True)
    (root / ".thrum" / "identities").mkdir(parents=True)
    (root / ".thrum" / "var").mkdir(parents=True)
    monkeypatch.chdir(root)
    for var in ("THRUM_NAME", "THRUM_ROLE", "THRUM_MODULE", "THRUM_DEBUG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("THRUM_NO_AUTOSTART", "1")
    monkeypatch.setenv("COLUMNS", "62")
    return root


@pytest.fixture
def alice(repo) -> Path:
    write_identity(repo, "alice", "implementer", "auth")
    return repo


@pytest.fixture
def daemon(repo):
    with FakeDaemon(thrum_paths.resolve(repo).socket) as d:
        d.on("message.markRead", marked)
        yield d


@pytest.fixture
def cli(capsys, monkeypatch):
    from thrum.cli.main import run

    def invoke(*args: str, stdin: str = "") -> Result:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = run(list(args))
        cap = capsys.readouterr()
        return Result(code, cap.out, cap.err)

    return invoke
