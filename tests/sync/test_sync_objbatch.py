"""A sync step's new objects as one pack (`thrum.sync.gitstore.objbatch`): the ids, commits and
packs it writes are the ones git and libgit2 would, and nothing is written unless asked."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ObjectType

from sync_helpers import git_fsck
from thrum.sync.gitstore.api import Oid, Signature, commit_object
from thrum.sync.gitstore.objbatch import ObjectBatch


@pytest.fixture
def repo(tmp_path):
    return pygit2.init_repository(str(tmp_path / "store.git"), bare=True)


def objects(repo: pygit2.Repository) -> Path:
    return Path(repo.path) / "objects"


@pytest.mark.parametrize("offset", [0, 330, -480, -30])
def test_a_commit_built_for_a_batch_is_the_commit_libgit2_writes(repo, offset):
    tree = repo.TreeBuilder().write()
    sig = pygit2.Signature("Zoë Agent", "zoe@example.org", 1_700_000_000, offset)
    ours = Signature("Zoë Agent", "zoe@example.org", 1_700_000_000, offset)
    root = repo.create_commit(None, sig, sig, "first\n\nbody line\n", tree, [])
    batch = ObjectBatch(objects(repo))
    tree_id = Oid(tree.raw)
    assert batch.write(ObjectType.COMMIT, commit_object(tree_id, [], ours, "first\n\nbody line\n")) == Oid(root.raw)
    child = repo.create_commit(None, sig, sig, "second", tree, [root])
    assert batch.write(ObjectType.COMMIT, commit_object(tree_id, [Oid(root.raw)], ours, "second")) == Oid(child.raw)


def test_a_flushed_batch_is_one_pack_git_reads_and_a_discarded_one_writes_nothing(repo):
    pack_dir = objects(repo) / "pack"
    discarded = ObjectBatch(objects(repo))
    discarded.write(ObjectType.BLOB, b"never written\n")
    del discarded
    assert not pack_dir.exists() or not any(pack_dir.iterdir())

    batch = ObjectBatch(objects(repo))
    blobs = [batch.write(ObjectType.BLOB, b'{"event_id": "%d"}\n' % i * (i + 1)) for i in range(50)]
    raw = b"".join(b"100644 f%02d\0%s" % (i, oid.raw) for i, oid in enumerate(blobs))
    tree = batch.write(ObjectType.TREE, raw)
    sig = Signature("thrum", "thrum@localhost", 1_700_000_000, 0)
    tip = batch.write(ObjectType.COMMIT, commit_object(tree, [], sig, "batch\n"))
    assert tip in batch and not repo.odb.exists(pygit2.Oid(raw=tip.raw))
    name = batch.flush()
    assert sorted(p.name for p in pack_dir.iterdir()) == [f"{name}.idx", f"{name}.pack"]
    assert batch.flush() is None  # nothing left waiting
    repo.references.create("refs/heads/a-sync", pygit2.Oid(raw=tip.raw))
    assert repo[pygit2.Oid(raw=blobs[7].raw)].data == b'{"event_id": "7"}\n' * 8
    assert [e.name for e in repo[pygit2.Oid(raw=tip.raw)].tree][:2] == ["f00", "f01"]
    git_fsck(repo.path)
