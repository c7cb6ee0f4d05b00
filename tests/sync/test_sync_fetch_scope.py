"""A sync fetches only the log: in a real team the remote is the project's code remote
(branches, tags) and the replica's checkout is the user's code repository (branches of
its own). A sync must neither bring the remote's code into the replica's object store
nor create refs there (tags), and what it offers the server as common history ("have"
lines) is the log's history only, not the user's branches."""

from __future__ import annotations

import re
import subprocess
import time

import pygit2
import pytest

from fixtures.repos.builders import EPOCH, add_code_history
from fixtures.servers.pytest_fixtures import git_http  # noqa: F401
from remote_helpers import net_cluster
from sync_helpers import append, event, history
from thrum.sync.transport.credentials import credentials_from_env
from thrum.sync.worktree import SYNC_REF

SHARD = "messages/alice/000001.jsonl"


def missing_from(repo, oids) -> set[str]:
    """The ids among ``oids`` that git itself does not find in ``repo``'s object store."""
    query = "".join(f"{o}\n" for o in oids)
    out = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-check"], input=query, capture_output=True, text=True, check=True
    ).stdout
    return {line.split()[0] for line in out.splitlines() if line.endswith(" missing")}


def tag_refs(repo) -> list[str]:
    return [r for r in pygit2.Repository(str(repo)).references if r.startswith("refs/tags/")]


def project_on(remote) -> set[pygit2.Oid]:
    """The remote's code beside the log: a branch no replica fetched with an annotated tag
    on it, a second branch, and a lightweight tag on the commit every clone holds."""
    feature = add_code_history(remote, "refs/heads/feature", files=600, commits=3, tag="v1.0", seed="feature")
    release = add_code_history(remote, "refs/heads/release", files=250, seed="release")
    bare = pygit2.Repository(str(remote))
    bare.references.create("refs/tags/light", bare.references["refs/heads/main"].target)
    return feature.objects | release.objects


@pytest.mark.parametrize("form", ["path", "file-url"])
def test_a_sync_from_a_path_remote_brings_the_log_only_not_the_projects_branches_or_tags(cluster, form):
    code = project_on(cluster.remote)
    a, b = cluster.a, cluster.b
    if form == "file-url":
        for replica in (a, b):
            pygit2.Repository(str(replica.repo)).remotes.set_url("origin", f"file://{cluster.remote}")
    append(a.worktree, SHARD, event("01A"))
    assert a.sync().pushed
    append(a.worktree, SHARD, event("01B"))
    assert a.sync().pushed
    report = b.sync()
    assert report.received == 2 and b.read(SHARD) == a.read(SHARD)
    assert b.head() == cluster.remote_tip()
    for replica in (a, b):
        assert missing_from(replica.repo, code) == {str(o) for o in code}, replica.repo
        assert tag_refs(replica.repo) == []
    tracking = pygit2.Repository(str(b.repo)).references["refs/remotes/origin/a-sync"].target
    assert str(tracking) == str(cluster.remote_tip())


def test_the_remote_dropping_its_branch_drops_the_tracking_ref_of_a_path_remote(cluster):
    a, b = cluster.a, cluster.b
    append(a.worktree, SHARD, event("01A"))
    assert a.sync().pushed and b.sync().received == 1
    assert "refs/remotes/origin/a-sync" in pygit2.Repository(str(b.repo)).references
    pygit2.Repository(str(cluster.remote)).references.delete(SYNC_REF)
    assert b.replicator.fetch() is None
    assert "refs/remotes/origin/a-sync" not in pygit2.Repository(str(b.repo)).references


_HAVE = re.compile(rb"have ([0-9a-f]{40})")
_WANT = re.compile(rb"want ([0-9a-f]{40})")


def test_a_fetch_over_smart_http_asks_for_the_log_and_offers_only_its_history(tmp_path, git_http):  # noqa: F811
    served = git_http(tmp_path / "srv", users={"alice": "s3cret"})
    home = tmp_path / "home"
    home.mkdir()
    creds = credentials_from_env(
        {},
        environ={
            "HOME": str(home),
            "PATH": "/usr/bin:/bin",
            "THRUM_GIT_TOKEN": "s3cret",
            "THRUM_GIT_USERNAME": "alice",
        },
    )
    c = net_cluster(tmp_path / "srv", 2, lambda remote: served.url("remote.git"), creds)
    code = project_on(c.remote)
    # the user's own work in the replica's checkout: newer than any log commit, so a
    # negotiation walking every branch by date offers these first
    future = int(time.time()) - EPOCH + 10**6
    topic = add_code_history(c.b.repo, "refs/heads/topic", files=40, commits=30, seed="topic", time_offset_s=future)
    append(c.a.worktree, SHARD, event("01A"))
    assert c.a.sync().pushed
    served.reset_stats()
    assert c.b.sync().received == 1
    bodies = [r.body for r in served.records if r.method == "POST" and r.path.endswith("/git-upload-pack")]
    assert bodies, "the fetch negotiated over git-upload-pack"
    wants = {m.decode() for body in bodies for m in _WANT.findall(body)}
    haves = {m.decode() for body in bodies for m in _HAVE.findall(body)}
    assert wants == {str(c.remote_tip())}
    log_history = {str(commit.id) for commit in history(c.b.repo / ".git", ref="refs/heads/a-sync")}
    assert haves and haves <= log_history, sorted(haves - log_history)[:3]
    assert not haves & {str(o) for o in topic.commits}
    assert missing_from(c.b.repo, code) == {str(o) for o in code}
    assert tag_refs(c.b.repo) == []


def _git_dir_files(repo) -> dict[str, tuple[int, int]]:
    """Every file under the replica's git dir, by inode and modification time."""
    git_dir = repo / ".git"
    return {
        str(p.relative_to(git_dir)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in git_dir.rglob("*") if p.is_file()
    }


def test_a_sync_with_nothing_new_after_a_receive_writes_nothing_in_the_repository(cluster):
    """Each ref written is a file replaced (on ext4 the replaced file is written out first:
    milliseconds of waiting): the fetch views keep only the remote's tip as the last fetch
    left it, so a sync with nothing new after a receive writes none."""
    a, b = cluster.a, cluster.b
    for turn in range(3):
        append(a.worktree, SHARD, event(f"01A{turn}"))
        assert a.sync().pushed and b.sync().received == 1
        before = _git_dir_files(b.repo)
        report = b.sync()
        assert report.received == 0 and report.sent == 0
        changed = {p for p, key in _git_dir_files(b.repo).items() if before.get(p) != key}
        # libgit2 truncates FETCH_HEAD at every fetch: empty, nothing to write out
        assert changed <= {"FETCH_HEAD"}, sorted(changed)
        assert (b.repo / ".git" / "FETCH_HEAD").stat().st_size == 0
    assert b.read(SHARD) == a.read(SHARD)
