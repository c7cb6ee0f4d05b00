"""Reading which paths git's index tracks under a prefix, against what `git ls-files` says,
for every index git writes: versions 2, 3 (intent-to-add entries) and 4, SHA-256
repositories, split and sparse indexes, linked worktrees, long names."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from thrum.gitindex import Unreadable, tracked_under

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(cwd, *args: str) -> str:
    env = {**os.environ, **ENV, "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


def _repo(tmp_path, *init_args: str, files=(".thrum/identities/alice.key", ".thrum/config.json")):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "--quiet", "-b", "main", *init_args)
    names = ["!bang", "-dash", ".github/ci.yml", ".thrum-not", ".thrumx", "a.txt", "src/x.py", "zz", *files]
    for name in names:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(name)
    _git(repo, "add", "-f", "--", *names)
    _git(repo, "commit", "--quiet", "-m", "c")
    return repo


def _expected(repo) -> list[str]:
    out = _git(repo, "ls-files", "-z", "--", ".thrum").split("\0")
    return sorted(x for x in out if x)


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_every_index_version(tmp_path, version):
    repo = _repo(tmp_path)
    (repo / "new.txt").write_text("n")
    _git(repo, "add", "-N", "new.txt")  # intent-to-add: an extended entry (version 3)
    _git(repo, "update-index", "--index-version", version)
    assert (
        sorted(tracked_under(repo, ".thrum"))
        == _expected(repo)
        == [
            ".thrum/config.json",
            ".thrum/identities/alice.key",
        ]
    )
    assert tracked_under(repo, ".thrum/identities/alice.key") == [".thrum/identities/alice.key"]
    assert tracked_under(repo, ".thrum/var") == []


def test_nothing_tracked_and_no_index(tmp_path):
    repo = _repo(tmp_path, files=())
    assert tracked_under(repo, ".thrum") == []
    bare = tmp_path / "empty"
    bare.mkdir()
    _git(bare, "init", "--quiet")
    assert tracked_under(bare, ".thrum") == []  # no index yet
    assert tracked_under(tmp_path / "nowhere", ".thrum") == []


def test_a_tracked_file_named_like_the_directory(tmp_path):
    repo = _repo(tmp_path, files=(".thrum",))
    assert tracked_under(repo, ".thrum") == [".thrum"]


def test_sha256_repositories(tmp_path):
    try:
        repo = _repo(tmp_path, "--object-format=sha256")
    except subprocess.CalledProcessError:
        pytest.skip("this git cannot make SHA-256 repositories")
    assert sorted(tracked_under(repo, ".thrum")) == _expected(repo)


def test_split_index(tmp_path):
    repo = _repo(tmp_path)
    _git(repo, "update-index", "--split-index")
    (repo / "later.txt").write_text("l")
    _git(repo, "add", "later.txt")
    assert sorted(tracked_under(repo, ".thrum")) == _expected(repo)


def test_sparse_index(tmp_path):
    repo = _repo(tmp_path)
    try:
        _git(repo, "sparse-checkout", "init", "--cone", "--sparse-index")
        _git(repo, "sparse-checkout", "set", "src")
    except subprocess.CalledProcessError:
        pytest.skip("this git has no sparse index")
    assert tracked_under(repo, ".thrum")  # a collapsed directory counts as tracking what is below it


def test_linked_worktree_has_its_own_index(tmp_path):
    repo = _repo(tmp_path, files=())
    _git(repo, "worktree", "add", "--quiet", "-b", "side", str(tmp_path / "wt"))
    wt = tmp_path / "wt"
    (wt / ".thrum").mkdir()
    (wt / ".thrum" / "redirect").write_text("/x\n")
    _git(wt, "add", "-f", ".thrum/redirect")
    assert tracked_under(wt, ".thrum") == [".thrum/redirect"]
    assert tracked_under(repo, ".thrum") == []


def test_long_names(tmp_path):
    long = ".thrum/" + "d" * 120 + "/" + "x" * 4200
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    _git(repo, "config", "core.longpaths", "true")
    oid = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"], cwd=repo, input="x", capture_output=True, text=True, check=True
    ).stdout.strip()
    _git(repo, "update-index", "--add", "--cacheinfo", f"100644,{oid},{long}")
    assert tracked_under(repo, ".thrum") == [long]


def test_a_truncated_index_is_unreadable(tmp_path):
    repo = _repo(tmp_path)
    index = repo / ".git" / "index"
    index.write_bytes(index.read_bytes()[:70])
    with pytest.raises(Unreadable):
        tracked_under(repo, ".thrum")
    index.write_bytes(b"NOPE" + bytes(8))
    with pytest.raises(Unreadable):
        tracked_under(repo, ".thrum")
