"""The log's worktree is never read or written through a symbolic link (`thrum.nofollow`,
the one walker the store and the sync share)."""

from __future__ import annotations

import os

import pytest

from fixtures.repos.builders import deep_directory, remove_deep_directory
from thrum import durable, nofollow


def test_a_linked_directory_is_replaced_not_followed(tmp_path):
    root, outside = tmp_path / "wt", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "messages")
    durable.write_atomic(root, "messages/bob/000001.jsonl", b"x\n")
    assert list(outside.iterdir()) == []
    assert not (root / "messages").is_symlink()
    assert (root / "messages" / "bob" / "000001.jsonl").read_bytes() == b"x\n"


def test_a_linked_file_is_never_read(tmp_path):
    root = tmp_path / "wt"
    (root / "messages" / "carol").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_bytes(b"token\n")
    os.symlink(secret, root / "messages" / "carol" / "000001.jsonl")
    with pytest.raises(nofollow.UnsafePath):  # the store's way: refused
        nofollow.read_regular(root, "messages/carol/000001.jsonl", drop_links=False)
    assert nofollow.read_regular(root, "messages/carol/000001.jsonl") is None  # the sync's: removed
    assert not (root / "messages" / "carol" / "000001.jsonl").is_symlink()
    assert secret.read_bytes() == b"token\n"


def test_writing_over_a_linked_file_replaces_the_link(tmp_path):
    root = tmp_path / "wt"
    (root / "messages" / "carol").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_bytes(b"token\n")
    os.symlink(secret, root / "messages" / "carol" / "000001.jsonl")
    durable.write_atomic(root, "messages/carol/000001.jsonl", b"line\n")
    assert secret.read_bytes() == b"token\n"
    assert (root / "messages" / "carol" / "000001.jsonl").read_bytes() == b"line\n"


def test_a_fifo_is_refused_without_blocking(tmp_path):
    root = tmp_path / "wt"
    (root / "messages" / "bob").mkdir(parents=True)
    os.mkfifo(root / "messages" / "bob" / "000001.jsonl")
    with pytest.raises(nofollow.UnsafePath):
        nofollow.read_regular(root, "messages/bob/000001.jsonl")


@pytest.mark.parametrize("rel", ["../x.jsonl", "messages/../../x.jsonl", "/etc/passwd", "a//b.jsonl"])
def test_paths_that_leave_the_root_are_refused(tmp_path, rel):
    with pytest.raises(nofollow.UnsafePath):
        durable.write_atomic(tmp_path, rel, b"x")


def test_walking_a_tree_is_iterative_and_bounded_in_depth(tmp_path):
    root = tmp_path / "wt"
    (root / "messages" / "bob").mkdir(parents=True)
    (root / "messages" / "bob" / "000001.jsonl").write_bytes(b"x\n")
    (root / "messages" / "bob" / f"{durable.TMP_PREFIX}000002.jsonl.1").write_bytes(b"torn")
    os.symlink("/etc", root / "messages" / "eve")
    (root / "junk").mkdir()
    deep_directory(root / "junk", 1530)  # deeper than any recursive walk survives
    try:
        assert nofollow.regular_files(root, lambda rel: rel.endswith(".jsonl")) == ["messages/bob/000001.jsonl"]
        assert durable.remove_temps(root) == [f"messages/bob/{durable.TMP_PREFIX}000002.jsonl.1"]
        assert sorted(os.listdir(root / "messages" / "bob")) == ["000001.jsonl"]
    finally:
        remove_deep_directory(root / "junk")


def test_remove_tree_never_follows_a_link_and_survives_any_depth(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not yours to delete\n")
    doomed = tmp_path / "doomed"
    (doomed / "a" / "b").mkdir(parents=True)
    (doomed / "a" / "b" / "f.jsonl").write_bytes(b"x\n")
    (doomed / "a" / "link").symlink_to(outside)
    (doomed / "file-link").symlink_to(outside / "keep.txt")
    deep_directory(doomed, 3000)  # deeper than Python's recursion limit
    try:
        nofollow.remove_tree(doomed)
    finally:
        if doomed.is_dir():  # never leave it to pytest's own (recursive) clean-up
            remove_deep_directory(doomed)
    assert not os.path.lexists(doomed)
    assert (outside / "keep.txt").read_text() == "not yours to delete\n"
    nofollow.remove_tree(doomed)  # already gone: nothing to do
    (tmp_path / "a-link").symlink_to(outside)
    nofollow.remove_tree(tmp_path / "a-link")  # the link goes, never what it points to
    assert not os.path.lexists(tmp_path / "a-link") and (outside / "keep.txt").exists()
