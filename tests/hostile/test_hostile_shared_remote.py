"""A remote on a shared filesystem (issue 31, finding 8), and trees no walk may die of
(finding 13). The attacker can write the remote's directory: plain file operations and
plain git. The victims are real daemons driven through the installed CLI. Whatever is
planted: it is refused in one line that says what and what to do, nothing is read or
written through it, local work goes on, and syncing resumes once the remote is repaired."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pygit2
import pytest

from hostile_helpers import team_with_history
from thrum import config as config_mod

SYNC_REF = "refs/heads/a-sync"


def git(*args: str, input: bytes | None = None) -> str:
    """Plain git, as the attacker runs it."""
    proc = subprocess.run(["git", *args], capture_output=True, input=input, check=True, timeout=120)
    return proc.stdout.decode().strip()


def refused(machine, *words: str) -> str:
    """``thrum sync`` fails with one line holding ``words``; that line."""
    proc = machine.run("sync", check=False)
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def remote_tip(remote: Path) -> str:
    return git("--git-dir", str(remote), "rev-parse", SYNC_REF)


def test_a_linked_ref_never_moves_the_victims_own_branch(team):
    """The attacker turns the remote's a-sync into a link to the victim's own main branch:
    a push would write the log's tip there (libgit2 writes a ref through a link)."""
    t, a, b = team_with_history(team)
    own_main = a.path / ".git" / "refs" / "heads" / "main"
    before = own_main.read_text()
    ref = t.remote / "refs" / "heads" / "a-sync"
    tip = ref.read_text()
    ref.unlink()
    ref.symlink_to(own_main)
    a.run("send", "while the link is there", "--to", "@bob", agent="alice")
    refused(a, "remote origin", "refs/heads/a-sync is a symbolic link")
    assert own_main.read_text() == before and not own_main.is_symlink()
    status = a.json("sync", "status")
    assert "symbolic link" in status["last_error"] and status["pending_events"] >= 1
    a.run("send", "local work goes on", "--to", "@bob", agent="alice")
    ref.unlink()  # the team repairs its remote
    ref.write_text(tip)
    a.sync()
    b.sync()
    contents = [m["body"]["content"] for m in b.json("inbox", agent="bob")["messages"]]
    assert "while the link is there" in contents and "local work goes on" in contents


@pytest.mark.parametrize("redirect", ["objects/info/alternates", "commondir"])
def test_redirections_never_lead_a_sync_into_another_repository(team, redirect):
    """The victim keeps a private team's log in another repository. The attacker points the
    shared remote into it (alternates: its objects; commondir: its refs and objects) and
    its branch at the private log's tip, hoping for a merge and a push of it."""
    t, a, b = team_with_history(team)
    private = team(1)
    (p,) = private.machines
    p.agent("zed", "implementer")
    p.run("send", "top secret plans", "--to", "@zed", agent="zed")
    p.sync()
    secret_tip = git("--git-dir", str(p.path / ".git"), "rev-parse", SYNC_REF)
    ref = t.remote / "refs" / "heads" / "a-sync"
    honest = ref.read_text()
    if redirect == "commondir":
        (t.remote / "commondir").write_text(f"{p.path / '.git'}\n")
    else:
        (t.remote / redirect).write_text(f"{p.path / '.git' / 'objects'}\n")
        ref.write_text(secret_tip + "\n")
    refused(a, "remote origin", redirect, "points to another repository")
    refused(b, redirect)
    for m in (a, b):
        assert not any(b"top secret" in data for data in m.shards().values())
        assert not pygit2.Repository(str(m.path)).odb.exists(secret_tip)
    (t.remote / redirect).unlink()
    ref.write_text(honest)
    assert not pygit2.Repository(str(t.remote)).odb.exists(secret_tip)  # nothing of it was pushed there
    a.sync()


def test_a_remote_another_user_owns_is_used_only_once_trusted(team):
    t, a, b = team_with_history(team)
    for path in [t.remote, *t.remote.rglob("*")]:
        os.lchown(path, 54321, 54321)
    line = refused(a, "belongs to uid 54321, not to you", '"trusted_remote_paths"', ".thrum/config.json")
    assert "safe.directory" in line
    a.run("send", "written meanwhile", "--to", "@bob", agent="alice")
    doctor = a.run("doctor", check=False)
    assert doctor.returncode == 1 and "not to you" in doctor.stdout
    config_mod.save(a.paths.config, {"trusted_remote_paths": [str(t.remote)]})
    a.run("daemon", "restart")
    a.sync()
    config_mod.save(b.paths.config, {"trusted_remote_paths": ["*"]})
    b.run("daemon", "restart")
    b.sync()
    assert "written meanwhile" in [m["body"]["content"] for m in b.json("inbox", agent="bob")["messages"]]


def _raw_tree(remote: Path, entries: list[tuple[str, str, str]]) -> str:
    """A tree object written as given (mode, name, id), in git's order: git's own checks
    skipped, as an attacker with write access to the directory can."""
    entries = sorted(entries, key=lambda e: e[1] + ("/" if e[0].lstrip("0") == "40000" else ""))
    raw = b"".join(
        b"%s %s\0" % (mode.lstrip("0").encode(), name.encode()) + bytes.fromhex(oid) for mode, name, oid in entries
    )
    return git("--git-dir", str(remote), "hash-object", "-t", "tree", "--literally", "-w", "--stdin", input=raw)


def _entries(remote: Path, tree: str) -> list[tuple[str, str, str]]:
    lines = git("--git-dir", str(remote), "ls-tree", tree).splitlines()
    return [(mode, name, oid) for mode, _kind, oid, name in (line.split(maxsplit=3) for line in lines)]


def _with_entry(remote: Path, tree: str, where: list[str], entry: tuple[str, str, str]) -> str:
    """``tree`` with ``entry`` added in its subdirectory ``where`` (a path, as a list of names)."""
    entries = _entries(remote, tree)
    if not where:
        return _raw_tree(remote, [*entries, entry])
    sub = next(oid for _mode, name, oid in entries if name == where[0])
    new = _with_entry(remote, sub, where[1:], entry)
    return _raw_tree(remote, [(m, n, new if n == where[0] else o) for m, n, o in entries])


@pytest.mark.parametrize("planted", ["tip is a blob", "a directory entry is a blob", "a file entry is a tree"])
def test_an_object_of_the_wrong_type_never_stops_local_work(team, fsck_expect, planted):
    t, a, b = team_with_history(team)
    remote = str(t.remote)
    honest = remote_tip(t.remote)
    blob = git("--git-dir", remote, "hash-object", "-w", "--stdin", input=b"not what it claims\n")
    tree = git("--git-dir", remote, "rev-parse", f"{honest}^{{tree}}")
    ref = t.remote / "refs" / "heads" / "a-sync"
    if planted == "tip is a blob":
        ref.write_text(blob + "\n")  # git update-ref would refuse: a plain file write does not
    else:
        if planted == "a directory entry is a blob":
            bad = _with_entry(t.remote, tree, [], ("40000", "messages2", blob))
            fsck_expect(f"{blob}")  # git fsck on the remote sees the mistyped entry too
        else:  # at a log file's own path: a tree where the layout says blob
            subtree = _raw_tree(t.remote, [("100644", "x", blob)])  # not the empty tree: a-sync's root uses that
            bad = _with_entry(t.remote, tree, ["events"], ("100644", "999999.jsonl", subtree))
            fsck_expect(f"{subtree}")  # and on every replica that merged past it (junk is kept, not repaired)
        ref.write_text(git("--git-dir", remote, "commit-tree", bad, "-p", honest, "-m", "mallory") + "\n")
    a.run("send", "written after the plant", "--to", "@bob", agent="alice")
    if planted == "a file entry is a tree":  # ignored like any other junk: syncing goes on
        a.sync()
        report = a.json("sync", "status")["last_report"]
        assert report["ignored_paths_by_reason"].get("wrong_type") == 1
    else:
        words = ("points to a blob", "tip is refused") if planted == "tip is a blob" else ("wrong type", "refused")
        refused(a, "remote origin", *words)
        a.run("send", "local work goes on", "--to", "@bob", agent="alice")
        assert a.json("sync", "status")["pending_events"] >= 2
        ref.write_text(honest + "\n")  # the team repairs its remote
        a.sync()
    b.sync()
    contents = [m["body"]["content"] for m in b.json("inbox", agent="bob")["messages"]]
    assert "written after the plant" in contents


def _deep_tree(remote: Path, depth: int) -> str:
    """A tree ``junk/d/d/.../d/deep.jsonl`` ``depth`` directories deep, written bottom up
    (no path that long is ever spelled out), as an entry ``junk`` of a new tree."""
    blob = git("--git-dir", str(remote), "hash-object", "-w", "--stdin", input=b"deep\n")
    repo = pygit2.Repository(str(remote))  # a loop of git mktree does the same, 1,530 processes slower
    oid = repo.odb.write(pygit2.enums.ObjectType.TREE, b"100644 deep.jsonl\0" + bytes.fromhex(blob))
    for _ in range(depth):
        oid = repo.odb.write(pygit2.enums.ObjectType.TREE, b"40000 d\0" + oid.raw)
    return str(oid)


def test_a_tree_thousands_of_levels_deep_is_walked_without_recursion(team):
    """A 1,530-level deep directory in an ignored path made consolidation die of
    RecursionError, and the offline `thrum sync` then exited without recording why."""
    t, a, b = team_with_history(team)
    remote = str(t.remote)
    honest = remote_tip(t.remote)
    deep = _deep_tree(t.remote, 1530)
    entries = [line.split(maxsplit=3) for line in git("--git-dir", remote, "ls-tree", honest).splitlines()]
    mine = sorted([(m, n, o) for m, _k, o, n in entries] + [("40000", "junk", deep)], key=lambda e: e[1] + "/")
    commit = git("--git-dir", remote, "commit-tree", _raw_tree(t.remote, mine), "-p", honest, "-m", "deep")
    git("--git-dir", remote, "update-ref", SYNC_REF, commit)
    b.sync()
    assert b.json("sync", "status")["last_report"]["ignored_paths_by_reason"].get("unknown_path", 0) >= 1
    a.run("daemon", "stop")
    a.run("sync")  # the offline cycle, and git's repack of both stores after it
    status = a.json("sync", "status")  # what the offline cycle recorded
    assert status["last_error"] is None and status["last_success"]
    for store in (a.path / ".git", t.remote):
        subprocess.run(["git", "--git-dir", str(store), "repack", "-d", "-q", "--geometric=2"], check=True)
    c = t.fresh_clone("c")  # attaches through the deep tree, materialising only log files
    assert not (c.worktree / "junk").exists()
    assert json.loads(c.run("sync", "--json").stdout)["ok"]
