"""The a-sync branch and its linked worktree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pygit2
import pytest

from fixtures.repos.builders import AUTHOR, deep_directory, make_bare, make_replicas, make_repo, remove_deep_directory
from sync_helpers import append, event, history
from thrum.sync import NotAGitRepository
from thrum.sync.cycle import run_cycle
from thrum.sync.logaccess import PlainLog
from thrum.sync.replicate import Replicator
from thrum.sync.worktree import (
    INIT_MESSAGE,
    SYNC_REF,
    common_dir,
    ensure_sync_worktree,
    is_git_repo,
    sync_worktree_path,
)


def user_state(path: Path) -> dict:
    """Everything of the user's checkout that must never change."""
    repo = pygit2.Repository(str(path))
    return {
        "head": repo.head.name,
        "target": repo.head.target,
        "index": sorted((e.path, e.id, e.mode) for e in repo.index),
        "status": repo.status(),
        "files": {
            p.relative_to(path): p.read_bytes()
            for p in path.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(path).parts
        },
        "branches": sorted(repo.branches.local),
    }


@pytest.fixture
def user_repo(tmp_path) -> Path:
    """A checkout on a user branch with a staged change and an unstaged one."""
    path = tmp_path / "work"
    repo = make_repo(path)
    repo.branches.local.create("feature", repo.head.peel(pygit2.Commit))
    repo.checkout("refs/heads/feature")
    (path / "staged.txt").write_text("staged\n")
    repo.index.add("staged.txt")
    repo.index.write()
    (path / "README.md").write_text("dirty work tree\n")
    (path / "untracked.txt").write_text("untracked\n")
    return path


def test_ensure_sync_worktree_leaves_user_state_untouched(user_repo):
    before = user_state(user_repo)
    wt = ensure_sync_worktree(user_repo)
    assert user_state(user_repo) | {"branches": None} == before | {"branches": None}
    assert user_state(user_repo)["branches"] == sorted(before["branches"] + ["a-sync"])
    assert wt == (user_repo / ".git" / "thrum-sync" / "a-sync").resolve()
    assert (wt / ".git").is_file()


def test_ensure_sync_worktree_creates_fixed_orphan_root(user_repo, tmp_path):
    wt = ensure_sync_worktree(user_repo)
    repo = pygit2.Repository(str(wt))
    assert repo.head.name == SYNC_REF
    root = repo.head.peel(pygit2.Commit)
    assert root.parent_ids == [] and root.message == INIT_MESSAGE
    assert len(root.tree) == 0
    # A second repository created offline gets the very same root.
    other = make_repo(tmp_path / "other")
    assert pygit2.Repository(str(ensure_sync_worktree(other.workdir))).head.target == root.id


def test_ensure_sync_worktree_is_idempotent(user_repo):
    wt = ensure_sync_worktree(user_repo)
    append(wt, "events/000001.jsonl", event("01A"))
    tip = pygit2.Repository(str(user_repo)).references[SYNC_REF].target
    assert ensure_sync_worktree(user_repo) == wt
    repo = pygit2.Repository(str(user_repo))
    assert repo.list_worktrees() == ["a-sync"]
    assert repo.references[SYNC_REF].target == tip
    assert (wt / "events/000001.jsonl").read_bytes() == event("01A")  # uncommitted append untouched


def test_ensure_sync_worktree_from_linked_worktree_and_subdirectory(user_repo, tmp_path):
    repo = pygit2.Repository(str(user_repo))
    repo.add_worktree("side", str(tmp_path / "side"))
    sub = user_repo / "deep" / "er"
    sub.mkdir(parents=True)
    expected = (user_repo / ".git").resolve()
    for start in (tmp_path / "side", sub, tmp_path / "side" / "README.md"):
        assert common_dir(start) == expected
        assert sync_worktree_path(start) == expected / "thrum-sync" / "a-sync"
    wt = ensure_sync_worktree(tmp_path / "side")
    assert wt == expected / "thrum-sync" / "a-sync"
    assert ensure_sync_worktree(sub) == wt
    assert sorted(repo.list_worktrees()) == ["a-sync", "side"]
    # The sync worktree itself maps back to the same common dir.
    assert common_dir(wt) == expected


def test_ensure_sync_worktree_attaches_to_remote_branch(tmp_path):
    pair = make_replicas(tmp_path, 2)
    # The remote's a-sync was started by someone else with a different root.
    bare = pygit2.Repository(str(pair.remote))
    root = bare.create_commit(SYNC_REF, AUTHOR, AUTHOR, "someone else's root\n", bare.TreeBuilder().write(), [])
    wa = ensure_sync_worktree(pair.a)
    assert pygit2.Repository(str(wa)).head.target == root
    append(wa, "messages/alice/000001.jsonl", event("01A"))
    assert run_cycle(Replicator(wa), PlainLog(wa)).pushed
    wb = ensure_sync_worktree(pair.b)
    tip = bare.references[SYNC_REF].target
    assert pygit2.Repository(str(wb)).head.target == tip
    assert [c.id for c in history(pair.b)] == [c.id for c in history(pair.remote)]
    assert (wb / "messages/alice/000001.jsonl").read_bytes() == event("01A")


def test_ensure_sync_worktree_unreachable_remote_creates_locally(tmp_path):
    repo = make_repo(tmp_path / "r")
    repo.remotes.create("origin", str(tmp_path / "missing.git"))
    wt = ensure_sync_worktree(tmp_path / "r")
    assert pygit2.Repository(str(wt)).head.peel(pygit2.Commit).message == INIT_MESSAGE


def test_ensure_sync_worktree_remote_without_branch_creates_root(tmp_path):
    make_bare(tmp_path / "remote.git", with_commit=True)
    repo = make_repo(tmp_path / "r")
    repo.remotes.create("origin", str(tmp_path / "remote.git"))
    wt = ensure_sync_worktree(tmp_path / "r")
    assert pygit2.Repository(str(wt)).head.peel(pygit2.Commit).parent_ids == []


def test_ensure_sync_worktree_recreates_deleted_directory(user_repo):
    wt = ensure_sync_worktree(user_repo)
    shutil.rmtree(wt)
    assert ensure_sync_worktree(user_repo) == wt
    assert pygit2.Repository(str(wt)).head.name == SYNC_REF
    assert pygit2.Repository(str(user_repo)).list_worktrees() == ["a-sync"]


def test_ensure_sync_worktree_recovers_events_from_broken_directory(user_repo):
    wt = ensure_sync_worktree(user_repo)
    append(wt, "messages/alice/000001.jsonl", event("01A"))
    assert Replicator(wt).commit_pending(PlainLog(wt))
    append(wt, "messages/alice/000001.jsonl", event("01B"))  # not committed yet
    shutil.rmtree(user_repo / ".git" / "worktrees" / "a-sync")  # metadata lost
    assert ensure_sync_worktree(user_repo) == wt
    assert (wt / "messages/alice/000001.jsonl").read_bytes() == event("01A") + event("01B")
    assert Replicator(wt).commit_pending(PlainLog(wt))
    assert not any(p.name.startswith("a-sync.broken") for p in wt.parent.iterdir())


def test_a_broken_worktree_holding_a_very_deep_directory_is_recovered_and_removed(user_repo):
    """Every tree walk is iterative (issue 31, finding 13): a 1,530-level deep directory in
    a broken worktree neither kills the recovery nor stays behind."""
    wt = ensure_sync_worktree(user_repo)
    append(wt, "messages/alice/000001.jsonl", event("01A"))
    (wt / "junk").mkdir()
    deep_directory(wt / "junk", 1530)
    shutil.rmtree(user_repo / ".git" / "worktrees" / "a-sync")  # metadata lost
    try:
        assert ensure_sync_worktree(user_repo) == wt
        assert (wt / "messages/alice/000001.jsonl").read_bytes() == event("01A")
        assert not (wt / "junk").exists()
        assert not any(p.name.startswith("a-sync.broken") for p in wt.parent.iterdir())
    finally:  # whatever failed, never leave the deep directory to pytest's recursive clean-up
        for top in [wt / "junk", *(p / "junk" for p in wt.parent.glob("a-sync.broken*"))]:
            if top.is_dir():
                remove_deep_directory(top)


def test_a_replicator_is_unhealthy_once_the_worktree_metadata_is_deleted(user_repo):
    wt = ensure_sync_worktree(user_repo)
    replicator = Replicator(wt)
    assert replicator.healthy()
    append(wt, "messages/alice/000001.jsonl", event("01A"))  # appended, not committed
    shutil.rmtree(user_repo / ".git" / "worktrees" / "a-sync")  # the directory and its .git file stay
    assert (wt / ".git").is_file() and not replicator.healthy()
    assert ensure_sync_worktree(user_repo) == wt  # what the daemon does when a replicator is unhealthy
    again = Replicator(wt)
    assert again.healthy()
    assert (wt / "messages/alice/000001.jsonl").read_bytes() == event("01A")
    assert again.commit_pending(PlainLog(again.worktree_path))


def test_a_replicator_is_unhealthy_when_the_worktree_link_points_elsewhere(user_repo, tmp_path):
    wt = ensure_sync_worktree(user_repo)
    replicator = Replicator(wt)
    (wt / ".git").write_text(f"gitdir: {tmp_path / 'elsewhere'}\n")
    assert not replicator.healthy()
    (wt / ".git").unlink()
    assert not replicator.healthy()


def test_ensure_sync_worktree_survives_moved_repository(user_repo, tmp_path):
    wt = ensure_sync_worktree(user_repo)
    append(wt, "events/000001.jsonl", event("01A"))
    moved = tmp_path / "moved"
    user_repo.rename(moved)
    new_wt = ensure_sync_worktree(moved)
    assert new_wt == (moved / ".git" / "thrum-sync" / "a-sync").resolve()
    assert (new_wt / "events/000001.jsonl").read_bytes() == event("01A")
    assert Replicator(new_wt).commit_pending(PlainLog(new_wt))


def test_common_dir_outside_a_repository_raises(tmp_path):
    assert not is_git_repo(tmp_path)
    with pytest.raises(NotAGitRepository, match="not a git repository"):
        common_dir(tmp_path)
    with pytest.raises(NotAGitRepository):
        ensure_sync_worktree(tmp_path)


def test_is_git_repo_true_for_checkout_bare_and_subdir(tmp_path):
    make_repo(tmp_path / "r")
    make_bare(tmp_path / "b.git")
    (tmp_path / "r" / "sub").mkdir()
    assert is_git_repo(tmp_path / "r") and is_git_repo(tmp_path / "b.git")
    assert is_git_repo(tmp_path / "r" / "sub")


def _attach_to_many_files(
    tmp_path: Path, monkeypatch, *, python: str | None = None, reports: list | None = None
) -> tuple[Path, dict[str, bytes]]:
    """B attaches to a remote whose a-sync holds 9 segment files over 4 streams, with the
    checkout split between two other processes from 4 files on (a large history's path);
    its progress reports go to ``reports``."""
    reports = reports if reports is not None else []
    from thrum.sync import checkout

    pair = make_replicas(tmp_path, 2)
    wa = ensure_sync_worktree(pair.a)
    files = {}
    for n, shard in enumerate(
        [f"messages/{who}/{i:06d}.jsonl" for who in ("alice", "bob") for i in (1, 2, 3)]
        + ["receipts/alice/000001.jsonl", "receipts/carol/000001.jsonl", "events/000001.jsonl"]
    ):
        files[shard] = event(f"01A{n:02d}") * (n + 1)
        append(wa, shard, files[shard])
    assert run_cycle(Replicator(wa), PlainLog(wa)).pushed
    monkeypatch.setattr(checkout, "SPLIT_FILES", 4)
    if python is not None:
        real = checkout.write_log_files
        monkeypatch.setattr(
            "thrum.sync.worktree.write_log_files",
            lambda read, root, found, progress: real(read, root, found, progress=progress, python=python),
        )
    return ensure_sync_worktree(pair.b, progress=reports.append), files


def _checked_out(wt: Path, files: dict[str, bytes]) -> None:
    """Every log file is there with its content, and git sees the worktree as its HEAD
    (the index holds each file with the stat of what was written)."""
    assert {str(p.relative_to(wt)): p.read_bytes() for p in wt.rglob("*.jsonl")} == files
    assert not [p for p in wt.rglob("*") if p.name.startswith(".thrum-tmp-")]
    repo = pygit2.Repository(str(wt))
    assert sorted(e.path for e in repo.index) == sorted(files)
    assert repo.status() == {}


def test_a_large_attach_is_checked_out_by_two_processes_as_by_one(tmp_path, monkeypatch, caplog):
    caplog.set_level("INFO", logger="thrum.sync.checkout")
    reports: list = []
    wt, files = _attach_to_many_files(tmp_path, monkeypatch, reports=reports)
    _checked_out(wt, files)
    assert "checked out 9 log files (9 by other processes)" in caplog.text
    # what `thrum init` shows: the fetch, then the checkout up to every file
    assert reports[0] == {"phase": "fetch", "remote": "origin"}
    assert [r["phase"] for r in reports[1:]] == ["checkout"] * (len(reports) - 1)
    assert reports[-1]["done"] == reports[-1]["files"] == 9


def test_a_failed_second_checkout_process_costs_no_file(tmp_path, monkeypatch, caplog):
    caplog.set_level("INFO", logger="thrum.sync.checkout")
    wt, files = _attach_to_many_files(tmp_path, monkeypatch, python=shutil.which("false") or "/bin/false")
    _checked_out(wt, files)
    assert "second process failed (exit 1" in caplog.text
    assert "checked out 9 log files" in caplog.messages


def test_a_second_checkout_process_that_cannot_start_costs_no_file(tmp_path, monkeypatch, caplog):
    caplog.set_level("INFO", logger="thrum.sync.checkout")
    wt, files = _attach_to_many_files(tmp_path, monkeypatch, python=str(tmp_path / "no-such-python"))
    _checked_out(wt, files)
    assert "cannot start a second process for the checkout" in caplog.text
    assert "checked out 9 log files" in caplog.messages


def test_a_checkout_interrupted_half_way_is_finished_by_the_next_attach(tmp_path, monkeypatch):
    """`thrum init` stopped (Ctrl-C) while it writes a large history's files: the worktree is
    registered on a-sync but holds part of the log. The next `thrum init` or daemon start
    writes the rest; before, it found the worktree healthy and the replica never saw the
    files the checkout had not reached (its index said nothing of them either)."""
    from thrum.sync import checkout

    pair = make_replicas(tmp_path, 2)
    wa = ensure_sync_worktree(pair.a)
    files = {}
    for n, shard in enumerate([f"messages/{who}/{i:06d}.jsonl" for who in ("alice", "bob") for i in (1, 2, 3)]):
        files[shard] = event(f"01B{n:02d}") * (n + 1)
        append(wa, shard, files[shard])
    assert run_cycle(Replicator(wa), PlainLog(wa)).pushed
    real = checkout.write_log_files

    def interrupted(read, root, found, progress):
        real(read, root, found[:2])
        raise KeyboardInterrupt

    monkeypatch.setattr("thrum.sync.worktree.write_log_files", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ensure_sync_worktree(pair.b)
    monkeypatch.setattr("thrum.sync.worktree.write_log_files", real)
    wt = ensure_sync_worktree(pair.b)
    _checked_out(wt, files)
    assert ensure_sync_worktree(pair.b) == wt  # and then it is left as it is
    _checked_out(wt, files)
