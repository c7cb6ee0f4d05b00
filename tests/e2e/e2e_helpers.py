"""Helpers for the end-to-end tests: a git checkout driven through the INSTALLED
``thrum`` executable (subprocess) with the real daemon."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures.repos.builders import make_repo
from fixtures.thrum_cli import run_thrum

THRUM = shutil.which("thrum")
TIMEOUT = 60


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)

    @property
    def err_line(self) -> str:
        """The single stderr line of a failed command (asserts there is exactly one)."""
        lines = self.err.splitlines()
        assert len(lines) == 1, f"expected one stderr line, got: {self.err!r}"
        assert lines[0].startswith("thrum: "), lines[0]
        return lines[0]


def base_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    env["COLUMNS"] = "100"
    env.update(extra)
    return env


class Repo:
    """A git checkout with thrum; `run` executes the installed CLI inside it (a process:
    the executable is what the end-to-end tests are about; `InProcessRepo` for tests that
    only set up and inspect through it)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.initialised = False

    def run(
        self,
        *args: str,
        agent: str | None = None,
        stdin: str | None = None,
        env: dict | None = None,
        cwd: Path | None = None,
        check: bool = False,
        timeout: float = TIMEOUT,
    ) -> Result:
        assert THRUM, "the thrum executable is not on PATH (source scripts/_venv.sh)"
        e = base_env(**(env or {}))
        if agent:
            e["THRUM_NAME"] = agent
        proc = self._thrum(args, cwd=cwd or self.path, env=e, input=stdin, timeout=timeout)
        res = Result(proc.returncode, proc.stdout, proc.stderr)
        if check:
            assert res.code == 0, f"thrum {' '.join(args)} -> {res.code}\nstdout: {res.out}\nstderr: {res.err}"
        return res

    def _thrum(self, args, *, cwd, env, input, timeout) -> subprocess.CompletedProcess:
        return subprocess.run(
            [THRUM, *args], cwd=str(cwd), env=env, input=input, capture_output=True, text=True, timeout=timeout
        )

    def ok(self, *args: str, **kw) -> Result:
        return self.run(*args, check=True, **kw)

    def init(self) -> "Repo":
        self.ok("init", "--non-interactive")
        self.initialised = True
        return self

    def agent(self, name: str, role: str, module: str = "") -> str:
        args = ["quickstart", "--name", name, "--role", role]
        if module:
            args += ["--module", module]
        self.ok(*args, "--quiet")
        return name

    def send(self, agent: str, text: str, *args: str) -> str:
        """Send as ``agent``; returns the new message id."""
        return self.ok("send", text, *args, "--json", agent=agent).json()["message_id"]

    def stop(self) -> None:
        if (self.path / ".thrum").exists():
            subprocess.run(
                [THRUM, "daemon", "stop"], cwd=str(self.path), env=base_env(), capture_output=True, timeout=TIMEOUT
            )


class InProcessRepo(Repo):
    """A `Repo` whose CLI runs in the test's process (fixtures/thrum_cli.py), for tests about
    something else (the hooks: `thrum hook` itself still runs as the host runs it)."""

    def _thrum(self, args, *, cwd, env, input, timeout) -> subprocess.CompletedProcess:
        return run_thrum(args, cwd=cwd, env=env, input=input, timeout=timeout)


def repo_factory_of(kind: type[Repo]):
    """A module fixture making initialised (or bare) ``kind`` repositories; their daemons
    stop at the module's end. A conftest.py that assigns it offers it to its directory's tests."""

    @pytest.fixture(scope="module")
    def repo_factory(tmp_path_factory):
        made: list[Repo] = []

        def make(name: str = "repo", *, init: bool = True) -> Repo:
            path = tmp_path_factory.mktemp("repos") / name
            make_repo(path)
            r = kind(path)
            made.append(r)
            return r.init() if init else r

        yield make
        for r in reversed(made):
            r.stop()

    return repo_factory


repo_factory = repo_factory_of(Repo)
