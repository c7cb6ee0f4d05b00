"""Mail semantics in thrum's own CLI (issue 14, part 1): archive, unread, peek,
threads, counts and subjects, through the installed CLI and a real daemon.

One shared repository; each test has its own agents so inbox state does not leak.
"""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def repo(shared):
    for name, role in (
        ("dora", "lead"),
        ("ed", "worker"),
        ("fay", "worker"),
        ("gus", "lead"),
        ("hal", "worker"),
        ("ivy", "lead"),
        ("jon", "worker"),
        ("kim", "lead"),
        ("lou", "worker"),
    ):
        shared.agent(name, role)
    return shared


def count(repo, agent: str, *flags: str) -> dict:
    return repo.ok("inbox", "--count", "--json", *flags, agent=agent).json()


def inbox_ids(repo, agent: str, *flags: str) -> list[str]:
    return [
        m["message_id"]
        for m in repo.ok("inbox", "--json", "--page-size", "100", *flags, agent=agent).json()["messages"]
    ]


def test_archive_takes_messages_out_of_the_inbox_and_keeps_them_reachable(repo):
    a = repo.send("dora", "first", "--to", "@ed")
    b = repo.send("dora", "second", "--to", "@ed")
    out = repo.ok("message", "archive", a, b, agent="ed").out
    assert out == "> Archived 2 messages\n"
    assert not {a, b} & set(inbox_ids(repo, "ed"))
    assert inbox_ids(repo, "ed", "--archived") == [b, a]
    assert repo.ok("message", "get", a, agent="ed").out.startswith(f"Message: {a}\n")
    assert a in repo.ok("thread", "show", a, "--peek", agent="ed").out
    assert a in inbox_ids(repo, "fay")  # archive marks are the archiver's own


def test_archiving_again_says_so_and_an_unknown_id_fails_differently(repo):
    a = repo.send("dora", "again", "--to", "@fay")
    repo.ok("message", "archive", a, agent="fay")
    again = repo.run("message", "archive", a, agent="fay")
    assert again.code == 1 and "already archived" in again.err_line and a in again.err_line
    unknown = repo.run("message", "archive", "msg_01JD5QA0B1C2D3E4F5G6H7J8K9", agent="fay")
    assert unknown.code == 1 and "already archived" not in unknown.err and "not found" in unknown.err_line
    fresh = repo.send("dora", "fresh", "--to", "@fay")
    mixed = repo.run("message", "archive", fresh, a, agent="fay")  # the new one is archived, the old one reported
    assert mixed.code == 1 and mixed.out == "> Archived 1 message\n" and "already archived" in mixed.err_line
    assert fresh in inbox_ids(repo, "fay", "--archived")


def test_unread_puts_messages_back_and_peek_does_not_mark_read(repo):
    a = repo.send("gus", "read me later", "--to", "@hal")
    before = count(repo, "hal")
    assert "read me later" in repo.ok("message", "get", "--peek", a, agent="hal").out
    assert count(repo, "hal") == before
    repo.ok("message", "get", a, agent="hal")
    assert count(repo, "hal")["unread"] == before["unread"] - 1
    assert repo.ok("message", "unread", a, agent="hal").out == "> Marked 1 message as unread\n"
    assert a in inbox_ids(repo, "hal", "--unread")
    assert count(repo, "hal") == before


def test_inbox_count_in_text_and_json(repo):
    repo.send("ivy", "one", "--to", "@jon")
    repo.send("ivy", "two", "--to", "@jon", "--scope", "t:count")
    got = count(repo, "jon")
    assert got["total"] >= 2 and got["unread"] >= 2
    text = repo.ok("inbox", "--count", agent="jon").out
    assert text == f"{got['total']} messages, {got['unread']} unread\n"
    assert count(repo, "jon", "--scope", "t:count") == {"total": 1, "unread": 1}
    assert count(repo, "jon") == got  # counting marks nothing read


def test_thread_show_and_list(repo):
    root = repo.send("kim", "Plan for the release", "--to", "@lou", "--subject", "Release")
    r1 = repo.ok("reply", root, "Sounds good", "--json", agent="lou").json()["message_id"]
    r2 = repo.ok("reply", r1, "Shipping now", "--json", agent="kim").json()["message_id"]
    thread_id = repo.ok("message", "get", root, "--json", agent="kim").json()["message"]["thread_id"]
    for key in (thread_id, root, r2):
        shown = repo.ok("thread", "show", key, "--json", "--peek", agent="lou").json()
        assert [m["message_id"] for m in shown["messages"]] == [root, r1, r2]
    text = repo.ok("thread", "show", root, agent="lou").out
    assert text.splitlines()[0].startswith(f"Thread {thread_id}: 3 messages")
    assert text.index(root) < text.index(r1) < text.index(r2)
    assert "Subject: Release" in text
    assert repo.ok("thread", "show", root, "--json", agent="lou").json()["messages"][2]["is_read"]  # marked

    other = repo.send("lou", "Another topic", "--to", "@kim")
    listed = repo.ok("thread", "list", "--json", agent="kim").json()
    threads = listed["threads"]
    assert threads[1]["thread_id"] == thread_id  # newest activity first
    mine = next(t for t in threads if t["thread_id"] == thread_id)
    assert (mine["message_count"], mine["subject"], mine["last_sender"]) == (3, "Release", "kim")
    newest = threads[0]
    assert newest["unread_count"] == 1 and newest["message_count"] == 1
    assert other in repo.ok("thread", "show", newest["thread_id"], "--json", "--peek", agent="kim").out
    table = repo.ok("thread", "list", agent="kim").out
    assert table.splitlines()[0].split() == [
        "THREAD",
        "MESSAGES",
        "UNREAD",
        "LAST",
        "ACTIVITY",
        "LAST",
        "FROM",
        "SUBJECT",
    ]
    assert thread_id in table and "Release" in table
    unknown = repo.run("thread", "show", "thr_01JD5QA0B1C2D3E4F5G6H7J8K9", agent="kim")
    assert unknown.code == 1 and unknown.err_line.startswith("thrum: no thread")


def test_subject_is_shown_by_message_get_and_the_inbox(repo):
    a = repo.send("dora", "The body text", "--to", "@ed", "--subject", "Deploy window")
    got = repo.ok("message", "get", "--peek", a, agent="ed").out
    assert got.splitlines()[1] == "  Subject: Deploy window"
    assert repo.ok("message", "get", a, "--json", agent="ed").json()["message"]["subject"] == "Deploy window"
    inbox = repo.ok("inbox", "--page-size", "100", agent="ed").out
    lines = inbox.splitlines()
    at = next(i for i, line in enumerate(lines) if a in line)
    assert "Subject: Deploy window" in lines[at + 1] and "The body text" in lines[at + 2]


def test_marks_and_subjects_survive_a_rebuild(repo_factory):
    r = repo_factory("rebuild")
    r.agent("mo", "lead")
    r.agent("ned", "worker")
    kept = r.send("mo", "keep", "--to", "@ned", "--subject", "Kept")
    gone = r.send("mo", "archive me", "--to", "@ned")
    back = r.send("mo", "unread me", "--to", "@ned")
    r.ok("message", "read", kept, back, agent="ned")
    r.ok("message", "archive", gone, agent="ned")
    r.ok("message", "unread", back, agent="ned")
    before = (count(r, "ned"), inbox_ids(r, "ned", "--archived"), inbox_ids(r, "ned", "--unread"))
    r.ok("daemon", "stop")
    (r.path / ".thrum" / "var" / "messages.db").unlink()
    after = (count(r, "ned"), inbox_ids(r, "ned", "--archived"), inbox_ids(r, "ned", "--unread"))
    assert after == before == ({"total": 2, "unread": 1}, [gone], [back])
    assert r.ok("message", "get", kept, "--json", agent="ned").json()["message"]["subject"] == "Kept"
    assert json.loads(r.ok("message", "get", kept, "--json", agent="ned").out)["message"]["is_read"]
