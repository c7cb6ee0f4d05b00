"""Remotes on this machine as users add them (relative paths, file:// URLs), and pushes
that lose a race to another pusher's ref lock: retried, never "unreachable"."""

from __future__ import annotations

import contextlib
import logging
import os

import pygit2
import pytest

from fixtures.repos.builders import make_replicas
from sync_helpers import append, assert_linear_single_root, event, keys_of
from thrum.sync.cycle import run_cycle
from thrum.sync.logaccess import PlainLog
from thrum.sync.replicate import Replicator
from thrum.sync.transport.session import lost_race
from thrum.sync.worktree import SYNC_REF, ensure_sync_worktree

SHARD = "messages/alice/000001.jsonl"


def _replica(path):
    wt = ensure_sync_worktree(path)
    return Replicator(wt), wt


@pytest.mark.parametrize("form", ["relative", "file-url"])
def test_relative_and_file_url_remotes_attach_and_sync_from_any_directory(tmp_path, form, caplog):
    pair = make_replicas(tmp_path, 2)
    a, wt_a = _replica(pair.a)
    append(wt_a, SHARD, event("01A1"))
    assert run_cycle(a, PlainLog(a.worktree_path)).pushed
    url = "../remote.git" if form == "relative" else pair.remote.as_uri()
    pygit2.Repository(str(pair.b)).remotes.set_url("origin", url)
    with caplog.at_level(logging.WARNING), contextlib.chdir("/"):
        b, wt_b = _replica(pair.b)  # attaches to the remote's a-sync: no second root, no warning
        assert "unsupported URL protocol" not in caplog.text and "creating it locally" not in caplog.text
        assert keys_of((wt_b / SHARD).read_bytes()) == keys_of(event("01A1"))
        append(wt_b, SHARD, event("01B1"))
        report = run_cycle(b, PlainLog(b.worktree_path))
    assert report.pushed
    assert report.remote_url == (str(pair.remote) if form == "relative" else url)
    assert run_cycle(a, PlainLog(a.worktree_path)).received == 1
    assert_linear_single_root(pair.remote)


def test_a_lost_race_in_any_form_is_recognised():
    for message in (
        "cannot push non-fastforwardable reference",
        "failed to create locked file '/srv/remote.git/refs/heads/a-sync.lock': File exists",
        "cannot lock ref 'refs/heads/a-sync': is at 1234 but expected 5678",
        "failed to update ref",
        "! [rejected] a-sync -> a-sync (fetch first)",
        "cannot push because a reference that you are trying to update on the remote contains "
        "commits that are not present locally.",
    ):
        assert lost_race(message), message
    for message in ("authentication required", "could not resolve host", "pre-receive hook declined"):
        assert not lost_race(message), message


def test_a_ref_lock_held_by_another_pusher_is_retried_not_reported_unreachable(tmp_path):
    pair = make_replicas(tmp_path, 2)
    a, wt_a = _replica(pair.a)
    append(wt_a, SHARD, event("01A1"))
    assert run_cycle(a, PlainLog(a.worktree_path)).pushed
    lock = pair.remote / "refs" / "heads" / "a-sync.lock"
    lock.write_text("held by another pusher\n")
    append(wt_a, SHARD, event("01A2"))
    sleeps = []

    def sleep(seconds):  # the other pusher finishes while we back off
        sleeps.append(seconds)
        if len(sleeps) == 2:
            os.unlink(lock)

    report = run_cycle(a, PlainLog(a.worktree_path), sleep=sleep, backoff_s=0.01)
    # the push first (cycle rule 5), then a fetch and push after each of the two back-offs
    assert report.pushed and report.error is None and report.attempts == 1 + 3
    tip = pygit2.Repository(str(pair.remote)).references[SYNC_REF].target
    assert tip == a.store.repo.references[SYNC_REF].target


def test_a_race_lost_every_time_is_reported_as_a_race(tmp_path):
    pair = make_replicas(tmp_path, 1)
    a, wt_a = _replica(pair.a)
    assert run_cycle(a, PlainLog(a.worktree_path)).pushed
    (pair.remote / "refs" / "heads" / "a-sync.lock").write_text("stuck\n")
    append(wt_a, SHARD, event("01A1"))
    report = run_cycle(a, PlainLog(a.worktree_path), sleep=lambda s: None, max_attempts=3)
    assert not report.pushed
    assert report.error == "push to origin was rejected 3 times because others kept pushing; the next sync retries"
