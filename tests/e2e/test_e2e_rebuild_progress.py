"""`thrum init` on a history it must first fold: progress on a terminal, silence otherwise (issue 29)."""

from __future__ import annotations

import os
import pty
import subprocess

from e2e_helpers import THRUM, TIMEOUT, Repo, base_env
from fixtures.repos.builders import make_replicas


def _without_projection(repo) -> None:
    repo.stop()
    for suffix in ("", "-wal", "-shm"):
        (repo.path / ".thrum" / "var" / f"messages.db{suffix}").unlink(missing_ok=True)


def _init_on_a_terminal(repo, *flags: str) -> tuple[int, str, str]:
    """``thrum init`` with stderr on a pseudo-terminal (what a person sees); (exit code, stdout, stderr)."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [THRUM, "init", "--non-interactive", *flags],
            cwd=str(repo.path),
            env=base_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=slave,
            timeout=TIMEOUT,
        )
    finally:
        os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    return proc.returncode, proc.stdout.decode(), err.decode(errors="replace")


def test_init_shows_the_first_rebuild_on_a_terminal_and_is_quiet_otherwise(fresh):
    repo = fresh.init()
    repo.agent("alice", "implementer")
    for i in range(5):
        repo.send("alice", f"history {i}")

    _without_projection(repo)
    code, out, err = _init_on_a_terminal(repo)
    assert code == 0, err
    assert "building the projection:" in err and "events/s" in err
    assert "projection built:" in err
    assert "building the projection" not in out  # stdout stays the command's own output

    _without_projection(repo)
    code, out, err = _init_on_a_terminal(repo, "--quiet")
    assert code == 0, err
    assert "projection" not in err

    _without_projection(repo)
    res = repo.run("init", "--non-interactive")  # no terminal: pipes, as scripts and CI have
    assert res.code == 0, res.err
    assert "projection" not in res.err and "\r" not in res.err
    assert repo.ok("search", "history", "--json", agent="alice").json()["total"] == 5  # rebuilt, search index too


def test_init_on_a_clone_shows_the_fetch_and_the_checkout_before_the_rebuild(tmp_path):
    pair = make_replicas(tmp_path, 2)
    a, b = Repo(pair.a), Repo(pair.b)
    try:
        a.init()
        a.agent("alice", "implementer")
        for i in range(3):
            a.send("alice", f"history {i}")
        assert a.run("sync", "--json").code == 0
        a.stop()

        code, out, err = _init_on_a_terminal(b)  # B attaches: fetch, checkout, first rebuild
        assert code == 0, err
        shown = [part for part in err.replace("\x1b[K", "").split("\r") if part.strip()]
        fetching = next(i for i, s in enumerate(shown) if s.startswith("thrum: fetching the team's log from origin"))
        checking = next(i for i, s in enumerate(shown) if s.startswith("thrum: checking out the log:"))
        built = next(i for i, s in enumerate(shown) if s.startswith("thrum: projection built:"))
        assert fetching < checking < built
        assert "checking out" not in out
        folded = int(shown[built].split("built: ")[1].split(" events")[0].replace(",", ""))
        assert folded >= 3 + 1  # A's history (alice's registration and her three messages) came along
    finally:
        a.stop()
        b.stop()


def test_init_on_a_clone_is_quiet_under_quiet_and_without_a_terminal(tmp_path):
    pair = make_replicas(tmp_path, 3)
    a = Repo(pair.a)
    quiet, piped = Repo(pair.b), Repo(tmp_path / "c")
    try:
        a.init()
        a.agent("alice", "implementer")
        a.send("alice", "history")
        assert a.run("sync", "--json").code == 0
        code, _, err = _init_on_a_terminal(quiet, "--quiet")
        assert code == 0, err
        assert "fetching" not in err and "checking out" not in err and "projection" not in err
        res = piped.run("init", "--non-interactive")  # pipes, as scripts and CI have
        assert res.code == 0, res.err
        assert "fetching" not in res.err and "checking out" not in res.err and "\r" not in res.err
    finally:
        for r in (a, quiet, piped):
            r.stop()
