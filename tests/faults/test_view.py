"""Findings 3 and 4 of issue 15: the view never silently disagrees with the log.

Disk full is a real, small tmpfs mounted for the test (skipped where this
machine does not allow mounting); corruption is random bytes written into the
real database file.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
from pathlib import Path

import pytest

from fixtures.waiting import until
from thrum import errors

from faults_helpers import start_daemon

KIB = 1024


@pytest.fixture
def mount_tmpfs():
    """``mount_tmpfs(path, size)`` mounts a fresh tmpfs there; unmounted at teardown."""
    mounted: list[Path] = []

    def mount(path: Path, size: str) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            pytest.skip(
                f"cannot mount a small file system here ({proc.stderr.strip() or proc.returncode}); "
                "the disk-full tests need root with CAP_SYS_ADMIN"
            )
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(fs: Path, leave: int) -> Path:
    """A filler file that leaves about ``leave`` bytes free on ``fs``."""
    import os

    st = os.statvfs(fs)
    free = st.f_bavail * st.f_frsize
    filler = fs / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    return filler


def _send_until_failures(d, content_size: int, *, want, limit: int = 400) -> tuple[list[str], list[str], list]:
    """Send until ``want(acked, failed)`` holds; returns acked ids, failed contents and error replies."""
    acked, failed, errs = [], [], []
    with d.client(timeout=30) as c:
        for i in range(limit):
            content = f"msg {i:04d} " + "x" * content_size
            try:
                acked.append(c.call("message.send", {"caller": "alice", "content": content})["message_id"])
            except errors.ThrumError as exc:
                failed.append(content)
                errs.append(exc)
            if want(acked, failed, c):
                break
    return acked, failed, errs


def _wait_current(d, timeout: float = 30.0) -> dict:
    return until(
        lambda: "view" not in (h := d.call("health")) and h, "the view to catch up", timeout=timeout, every=0.2
    )


def _visible_ids(d) -> set[str]:
    out, page = set(), 1
    while True:
        r = d.call("message.list", {"page_size": 100, "page": page, "sort_order": "asc"})
        out.update(m["message_id"] for m in r["messages"])
        if page >= r["total_pages"]:
            return out
        page += 1


def test_disk_full_under_the_database_acknowledges_durable_sends_and_repairs_the_view(tmp_path, mount_tmpfs):
    """Finding 3: the log took message #43, SQLite did not; the client heard -32603 and the view lost it."""
    d = start_daemon(tmp_path / "d", start=False)
    mount_tmpfs(d.paths.var, "2m")
    d.start()
    try:
        d.register("alice")
        filler = _fill(d.paths.var, 96 * KIB)
        acked, failed, errs = _send_until_failures(
            d, 3000, want=lambda a, f, c: f or ("view" in c.call("health") and len(a) > 5), limit=300
        )
        assert failed == [], f"durable sends were reported as failures: {errs[:2]}"
        assert "view" in d.call("health"), "the database never filled up"
        status = d.call("daemon.status")["view"]
        assert status["state"] == "behind" and "full" in status["error"]
        created = [e["message_id"] for e in d.log_events("message.create")]
        assert sorted(created) == sorted(acked)  # every acknowledged send is in the log, once
        filler.unlink()
        _wait_current(d)  # no restart, no manual rebuild
        assert _visible_ids(d) == set(acked)
        assert d.call("message.get", {"message_id": acked[-1]})["message"]["message_id"] == acked[-1]
        d.stop()
        d.start()
        assert _visible_ids(d) == set(acked)
    finally:
        d.stop()


def test_disk_full_under_the_log_stores_nothing_and_leaves_no_partial_line(tmp_path, mount_tmpfs):
    """Finding 3: failed sends left a partial 3 KB line in the log."""
    fs = mount_tmpfs(tmp_path / "small", "4m")
    d = start_daemon(fs, start=False)
    d.start()
    try:
        d.register("alice")
        filler = _fill(fs, 160 * KIB)
        acked, failed, errs = _send_until_failures(d, 3000, want=lambda a, f, c: len(f) >= 5)
        assert failed, "the file system never filled up"
        for exc in errs:
            assert exc.code in (errors.UNAVAILABLE,), exc
            assert "nothing was stored" in exc.message
        lines = d.log_lines()
        for line in lines:
            json.loads(line)  # no partial line, no torn bytes
        created = [e["message_id"] for e in d.log_events("message.create")]
        assert sorted(created) == sorted(acked)
        assert not any(e["body"]["content"] in failed for e in d.log_events("message.create"))
        filler.unlink()
        more = d.call("message.send", {"caller": "alice", "content": "after the disk was freed"})["message_id"]
        _wait_current(d)
        assert _visible_ids(d) == set(acked) | {more}
        d.stop()
        d.start()
        assert _visible_ids(d) == set(acked) | {more}
    finally:
        d.stop()


def _corrupt_pages(db: Path, fraction: float, seed: int = 15) -> int:
    """Overwrite a fraction of the database's pages (never the first) with random bytes."""
    page = 4096
    data = bytearray(db.read_bytes())
    pages = len(data) // page
    rng = random.Random(seed)
    hit = rng.sample(range(1, pages), max(1, int((pages - 1) * fraction)))
    for n in hit:
        data[n * page : (n + 1) * page] = rng.randbytes(page)
    db.write_bytes(bytes(data))
    return len(hit)


def test_a_corrupt_database_is_rebuilt_when_sqlite_says_so(fresh):
    """Finding 4: random pages in messages.db; 176 of 179 pages answered 'malformed', even after a restart."""
    d = fresh()
    d.register("alice")
    with d.client() as c:
        sent = {
            c.call("message.send", {"caller": "alice", "content": f"m{i} " + "y" * 600})["message_id"]
            for i in range(300)
        }
    d.stop()
    for suffix in ("-wal", "-shm"):
        Path(f"{d.paths.database}{suffix}").unlink(missing_ok=True)
    assert _corrupt_pages(d.paths.database, 0.3) > 10
    d.start()
    assert _visible_ids(d) == sent  # every page answers, with every message
    assert d.call("daemon.status")["view"]["state"] == "current"
    assert "rebuilding" in d.log_text()
    d.stop()
    d.start()
    assert _visible_ids(d) == sent


def test_corruption_first_met_by_a_query_is_repaired_and_the_query_answered(fresh):
    """Start-up reads little of the file; the first query to hit a bad page triggers the rebuild."""
    d = fresh()
    d.register("alice")
    with d.client() as c:
        sent = {
            c.call("message.send", {"caller": "alice", "content": f"m{i} " + "z" * 600})["message_id"]
            for i in range(200)
        }
    d.stop()
    wal = Path(f"{d.paths.database}-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # a stopped daemon's folds are all in the file
    for suffix in ("-wal", "-shm"):
        Path(f"{d.paths.database}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(d.paths.database) as db:  # the pages of the messages table itself, not its indexes
        pages = [n for (n,) in db.execute("SELECT pageno FROM dbstat WHERE name='messages' AND pagetype='leaf'")]
    data = bytearray(d.paths.database.read_bytes())
    for n in pages:
        data[(n - 1) * 4096 : n * 4096] = random.Random(n).randbytes(4096)
    d.paths.database.write_bytes(bytes(data))
    d.start()
    assert "rebuild" not in d.log_text()  # start-up did not notice
    assert _visible_ids(d) == sent
    assert "is corrupt" in d.log_text() and "projection rebuilt from the log" in d.log_text()
    assert d.call("daemon.status")["view"]["rebuilds"] == 1


def test_start_up_repairs_a_projection_that_lost_folded_events(fresh):
    """The read positions say a line was folded but the projection does not have it."""
    d = fresh()
    d.register("alice")
    ids = [d.call("message.send", {"caller": "alice", "content": f"n{i}"})["message_id"] for i in range(5)]
    d.stop()
    with sqlite3.connect(d.paths.database) as db:  # what a restored or hand-edited file looks like
        db.execute("DELETE FROM messages WHERE message_id=?", (ids[-1],))
    d.start()
    assert d.call("message.get", {"message_id": ids[-1]})["message"]["body"]["content"] == "n4"
    assert "folding them again" in d.log_text()
