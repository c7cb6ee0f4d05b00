"""The sync worktree is never read or written through a symbolic link."""

from __future__ import annotations

import os

import pytest

from thrum.sync import safefs


def test_a_linked_directory_is_replaced_not_followed(tmp_path):
    root, outside = tmp_path / "wt", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "messages")
    safefs.write_atomic(root, "messages/bob.jsonl", b"x\n")
    assert list(outside.iterdir()) == []
    assert not (root / "messages").is_symlink()
    assert (root / "messages" / "bob.jsonl").read_bytes() == b"x\n"


def test_a_linked_file_is_never_read(tmp_path):
    root = tmp_path / "wt"
    (root / "messages").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_bytes(b"token\n")
    os.symlink(secret, root / "messages" / "carol.jsonl")
    assert safefs.read_regular(root, "messages/carol.jsonl") is None
    assert secret.read_bytes() == b"token\n"


def test_writing_over_a_linked_file_replaces_the_link(tmp_path):
    root = tmp_path / "wt"
    (root / "messages").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_bytes(b"token\n")
    os.symlink(secret, root / "messages" / "carol.jsonl")
    safefs.write_atomic(root, "messages/carol.jsonl", b"line\n")
    assert secret.read_bytes() == b"token\n"
    assert (root / "messages" / "carol.jsonl").read_bytes() == b"line\n"


def test_a_fifo_is_refused_without_blocking(tmp_path):
    root = tmp_path / "wt"
    (root / "messages").mkdir(parents=True)
    os.mkfifo(root / "messages" / "bob.jsonl")
    with pytest.raises(safefs.UnsafePath):
        safefs.read_regular(root, "messages/bob.jsonl")


@pytest.mark.parametrize("rel", ["../x.jsonl", "messages/../../x.jsonl", "/etc/passwd", "a//b.jsonl"])
def test_paths_that_leave_the_root_are_refused(tmp_path, rel):
    with pytest.raises(safefs.UnsafePath):
        safefs.write_atomic(tmp_path, rel, b"x")


def test_remove_unwanted_keeps_only_wanted_regular_files(tmp_path):
    root = tmp_path / "wt"
    (root / "messages").mkdir(parents=True)
    (root / ".git").write_text("gitdir: somewhere\n")
    (root / "messages" / "bob.jsonl").write_bytes(b"x\n")
    (root / "junk.sh").write_bytes(b"rm -rf /\n")
    os.symlink("/etc/passwd", root / "messages" / "eve.jsonl")
    removed = safefs.remove_unwanted(root, lambda rel: rel.endswith(".jsonl"))
    assert sorted(removed) == ["junk.sh", "messages/eve.jsonl"]
    assert (root / ".git").exists()
    assert (root / "messages" / "bob.jsonl").exists()
