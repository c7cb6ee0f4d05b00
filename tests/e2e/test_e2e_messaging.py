"""Messaging through the installed CLI and a real daemon, in one shared repository.

Each test uses its own agents and/or scope so the shared inbox state of other
tests does not matter.
"""

from __future__ import annotations

import re

import pytest

MSG_ID = re.compile(r"msg_[0-9A-Za-z_-]+")


@pytest.fixture(scope="module")
def repo(shared):
    shared.agent("alice", "implementer", "auth")
    shared.agent("bob", "reviewer", "auth")
    shared.agent("carol", "tester", "ui")
    return shared


def box_headers(out: str) -> list[str]:
    return [line for line in out.splitlines() if MSG_ID.search(line) and line.startswith("│ ")]


def test_two_agents_exchange_messages(repo):
    r = repo.ok("send", "Auth module complete", "--to", "@bob", "--scope", "t:exchange", agent="alice")
    mid = MSG_ID.search(r.out).group()
    assert r.out.startswith(f"> Message sent: {mid}\n")

    inbox = repo.ok("inbox", "--scope", "t:exchange", agent="bob")
    [header] = box_headers(inbox.out)
    assert header.startswith(f"│ ● {mid}  @alice  just now")
    assert "│ Auth module complete" in inbox.out
    assert inbox.out.splitlines()[-1] == "Showing 1-1 of 1 message (1 unread)"

    again = repo.ok("inbox", "--scope", "t:exchange", agent="bob")  # auto-marked read by the first view
    assert box_headers(again.out)[0].startswith(f"│ ○ {mid}")
    assert again.out.splitlines()[-1] == "Showing 1-1 of 1 message (0 unread)"

    own = repo.ok("inbox", "--scope", "t:exchange", agent="alice")  # my own messages are not in my inbox
    assert own.out.startswith("No messages matching filter --scope t:exchange\n")


def test_reply_threading_display_and_marks_parent_read(repo):
    parent = repo.send("alice", "Please review PR #42", "--to", "@reviewer", "--scope", "t:thread")
    r = repo.ok("reply", parent, "Looks good, merging now", agent="bob")
    reply_id = MSG_ID.search(r.out).group()
    assert r.out == f"> Reply sent: {reply_id}\n  In reply to: {parent}\n"

    # replying marked the parent read for bob
    assert repo.ok("inbox", "--scope", "t:thread", "--unread", agent="bob").out.startswith("No messages matching")

    listing = repo.ok("inbox", "--page-size", "50", agent="carol").out
    assert listing.index(f"● {parent}") < listing.index(f"↳ {reply_id}")
    lines = listing.splitlines()
    at = next(i for i, line in enumerate(lines) if f"↳ {reply_id}" in line)
    assert "@bob" in lines[at]
    assert lines[at + 1].startswith("│   Looks good, merging now")


def test_unread_filter_does_not_mark_and_plain_inbox_does(repo):
    mid = repo.send("alice", "peek at me", "--scope", "t:unread")
    for _ in range(2):
        out = repo.ok("inbox", "--unread", "--scope", "t:unread", agent="carol").out
        assert f"● {mid}" in out
    repo.ok("inbox", "--scope", "t:unread", agent="carol")
    out = repo.ok("inbox", "--unread", "--scope", "t:unread", agent="carol").out
    assert out == (
        "No messages matching filter --scope t:unread --unread\n"
        f"Showing 0 of {total_inbox(repo, 'carol')} total messages (filter: scope=t:unread, unread)\n"
    )


def total_inbox(repo, agent: str) -> int:
    return repo.ok("inbox", "--json", "--page-size", "1", agent=agent).json()["total"]


def test_scope_filter_empty_state_counts_the_whole_inbox(repo):
    repo.send("alice", "scoped", "--scope", "module:auth")
    out = repo.ok("inbox", "--scope", "module:nothing_here", agent="bob").out
    total = repo.ok("inbox", "--json", "--page-size", "1", agent="bob").json()["total"]
    assert out == (
        "No messages matching filter --scope module:nothing_here\n"
        f"Showing 0 of {total} total messages (filter: scope=module:nothing_here)\n"
    )
    assert total >= 1


def test_mentions_filter(repo):
    to_bob = repo.send("alice", "for bob only", "--to", "@bob", "--scope", "t:mentions")
    to_tester = repo.send("alice", "for testers", "--mention", "tester", "--scope", "t:mentions")
    bob = repo.ok("inbox", "--mentions", "--scope", "t:mentions", agent="bob").out
    carol = repo.ok("inbox", "--mentions", "--scope", "t:mentions", agent="carol").out
    assert to_bob in bob
    assert to_tester not in bob
    assert to_tester in carol
    assert to_bob not in carol


def test_edit_get_delete(repo):
    mid = repo.send("alice", "first draft", "--scope", "t:edit", "--ref", "issue:beads-42")
    edited = repo.ok("message", "edit", mid, "second draft", agent="alice").out
    assert re.fullmatch(rf"> Message edited: {mid} \(version \d+\)\n", edited)

    got = repo.ok("message", "get", mid, agent="bob").out
    assert got.startswith(f"Message: {mid}\n  From:    @alice\n  Time:    just now\n")
    assert "  Scopes:  t:edit\n" in got
    assert "issue:beads-42" in got
    assert "  Edited:  just now\n" in got
    assert got.rstrip().endswith("second draft")
    assert "(edited)" in box_headers(repo.ok("inbox", "--scope", "t:edit", agent="carol").out)[0]

    r = repo.run("message", "edit", mid, "hijack", agent="bob")
    assert r.code == 1
    assert "author" in r.err_line

    r = repo.run("message", "delete", mid, agent="alice")
    assert r.code == 2
    assert "--force" in r.err_line
    assert repo.ok("message", "delete", mid, "--force", agent="alice").out == f"> Message deleted: {mid}\n"
    assert "  Status:  DELETED\n" in repo.ok("message", "get", mid, agent="bob").out
    assert repo.ok("inbox", "--scope", "t:edit", agent="bob").out.startswith("No messages matching")
    r = repo.run("message", "edit", mid, "zombie", agent="alice")
    assert r.code == 1
    assert "deleted" in r.err_line


def test_edit_version_counts_the_edits(repo):
    # spec: "The version number reflects the total number of edits applied to the message"
    mid = repo.send("alice", "v1", "--scope", "t:version")
    assert repo.ok("message", "edit", mid, "v2", agent="alice").out == f"> Message edited: {mid} (version 1)\n"
    assert repo.ok("message", "edit", mid, "v3", agent="alice").out == f"> Message edited: {mid} (version 2)\n"


def test_message_get_marks_read_and_read_all(repo):
    a = repo.send("alice", "one", "--scope", "t:read")
    b = repo.send("alice", "two", "--scope", "t:read")
    repo.ok("message", "get", a, agent="carol")
    out = repo.ok("inbox", "--unread", "--scope", "t:read", agent="carol").out
    assert a not in out
    assert b in out
    assert repo.ok("message", "read", b, agent="carol").out == "> Marked 1 message as read\n"
    repo.send("alice", "three", "--scope", "t:read")
    marked = repo.ok("message", "read", "--all", agent="carol").out
    assert re.fullmatch(r"> Marked \d+ messages? as read\n", marked)
    assert repo.ok("inbox", "--unread", agent="carol").out.startswith("No messages matching filter --unread")


def test_sent_shows_readers(repo):
    mid = repo.send("carol", "did you read this?", "--to", "@alice")
    repo.ok("message", "get", mid, agent="alice")
    out = repo.ok("sent", agent="carol").out
    assert mid in out
    assert "Read by: @alice" in out


def test_groups_with_role_members_and_late_joiner(repo):
    assert (
        repo.ok("group", "create", "qa", "--description", "Quality team", agent="alice").out == "> Group created: @qa\n"
    )
    assert repo.ok("group", "add", "qa", "--role", "tester", agent="alice").out == "> Added role tester to @qa\n"
    assert repo.ok("group", "add", "@qa", "@bob", agent="alice").out == "> Added @bob to @qa\n"
    members = repo.ok("group", "members", "qa", agent="alice").out.split()
    assert "@bob" in members
    assert "role:tester" in members
    mid = repo.send("alice", "QA please check the build", "--to", "@qa", "--scope", "t:group")

    repo.agent("dave", "tester", "ui")  # joins after the message was sent
    assert mid in repo.ok("inbox", "--mentions", "--scope", "t:group", agent="dave").out
    expanded = repo.ok("group", "members", "qa", "--expand", agent="alice").out.split()
    assert {"@bob", "@carol", "@dave"} <= set(expanded)

    groups = repo.ok("group", "list", "--json").json()["groups"]
    assert {"everyone", "qa"} <= {g["name"] for g in groups}
    assert repo.ok("group", "info", "qa").out.startswith("Group: @qa\n  Description: Quality team\n")
    r = repo.run("group", "delete", "everyone", agent="alice")
    assert r.code == 1
    assert "everyone" in r.err_line
    assert repo.ok("group", "remove", "qa", "@bob", agent="alice").out == "> Removed @bob from @qa\n"


def test_unknown_recipient_lists_close_matches_and_stores_nothing(repo):
    before = repo.ok("sent", "--json", agent="alice").json()["total"]
    r = repo.run("send", "hello?", "--to", "@bobb", agent="alice")
    assert r.code == 1
    assert r.out == ""
    assert "bobb" in r.err_line
    assert "bob" in r.err_line.split("bobb", 1)[1]
    assert repo.ok("sent", "--json", agent="alice").json()["total"] == before


def test_body_over_one_mib_is_rejected(repo, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("x" * (1024 * 1024 + 1))
    before = repo.ok("sent", "--json", agent="alice").json()["total"]
    r = repo.run("send", "--body-file", str(big), agent="alice")
    assert r.code == 1
    assert "limit" in r.err_line
    assert repo.ok("sent", "--json", agent="alice").json()["total"] == before


def test_invalid_structured_and_tags_store_nothing(repo):
    before = repo.ok("sent", "--json", agent="alice").json()["total"]
    for args in (
        ["--structured", "{bad"],
        ["--scope", "nocolon"],
        ["--ref", "x:"],
        ["--priority", "urgent"],
        ["--format", "html"],
    ):
        r = repo.run("send", "x", *args, agent="alice")
        assert r.code == 2, args
        assert r.err_line  # exactly one "thrum: ..." line on stderr
    assert repo.ok("sent", "--json", agent="alice").json()["total"] == before


def test_structured_and_priority_round_trip(repo):
    mid = repo.send(
        "alice",
        "Test results",
        "--structured",
        '{"type":"test_result","passed":45}',
        "--priority",
        "high",
        "--format",
        "plain",
    )
    got = repo.ok("message", "get", mid, "--json", agent="bob").json()["message"]
    assert got["body"]["format"] == "plain"
    assert '"passed"' in got["body"]["structured"] or got["body"]["structured"]["passed"] == 45
    assert "  Priority: high" in repo.ok("message", "get", mid, agent="bob").out


def test_broadcast_is_deprecated_but_works(repo):
    r = repo.ok("send", "Deploy complete", "--broadcast", "--scope", "t:bcast", agent="alice")
    assert "deprecated" in r.err
    assert "--to @everyone" in r.err
    assert "Deploy complete" in repo.ok("inbox", "--mentions", "--scope", "t:bcast", agent="carol").out


def test_stdin_body(repo):
    mid = repo.ok("send", "-", "--json", "--scope", "t:stdin", agent="alice", stdin="from a pipe\n").json()[
        "message_id"
    ]
    assert "from a pipe" in repo.ok("message", "get", mid, agent="bob").out


def test_json_outputs_parse(repo):
    sent = repo.ok("send", "json please", "--json", "--to", "@bob", agent="alice").json()
    assert sent["message_id"].startswith("msg_")
    assert sent["recipients"]
    inbox = repo.ok("inbox", "--json", agent="bob").json()
    assert {"messages", "total", "unread", "page", "page_size", "total_pages"} <= set(inbox)
    assert repo.ok("--json", "inbox", agent="bob").json()["total"] == inbox["total"]
    status = repo.ok("daemon", "status", "--json").json()
    assert {"running", "pid", "uptime", "socket", "repo"} <= set(status)
    assert status["running"] is True
    assert repo.ok("whoami", "--json", agent="bob").json()["name"] == "bob"
    agents = repo.ok("agent", "list", "--json").json()["agents"]
    assert {"alice", "bob", "carol"} <= {a["name"] for a in agents}
    reply = repo.ok("reply", sent["message_id"], "ok", "--json", agent="bob").json()
    assert reply["message_id"].startswith("msg_")
    assert repo.ok("session", "list", "--json", agent="bob").json()["sessions"]


def test_agent_and_session_commands(repo):
    out = repo.ok("agent", "list").out
    assert out.startswith("AGENT")
    assert "@alice" in out
    assert "implementer" in out
    assert "@bob" in repo.ok("agent", "list", "--role", "reviewer").out
    assert "@alice" not in repo.ok("agent", "list", "--role", "reviewer").out
    who = repo.ok("whoami", agent="alice").out
    assert who.startswith("Agent:   @alice\nRole:    implementer\nModule:  auth\n")
    assert "Session: ses_" in who
    started = repo.ok("session", "start", agent="carol").out
    sid = re.search(r"ses_\S+", started).group()
    assert repo.ok("session", "end", agent="carol").out == f"> Session ended: {sid} (normal)\n"
    assert sid in repo.ok("session", "list", agent="carol").out


def test_error_paths_exit_1_with_one_line(repo, tmp_path):
    cases = [
        (["message", "get", "msg_01NOSUCHMESSAGE0000000000"], {}),
        (["reply", "msg_01NOSUCHMESSAGE0000000000", "hi"], {"agent": "alice"}),
        (["send", "hi"], {"agent": "nobody_here"}),
        (["send", "hi"], {}),  # several identities and no selector
        (["group", "info", "no_such_group"], {}),
        (["agent", "delete", "no_such_agent"], {}),
        (["inbox"], {"cwd": tmp_path}),  # not a git repository
    ]
    for args, kw in cases:
        r = repo.run(*args, **kw)
        assert r.code == 1, (args, r.out, r.err)
        assert r.err_line, args
        assert r.out == "", args
        assert "Traceback" not in r.err


def test_agent_delete_removes_it_and_its_identity_file(repo):
    repo.agent("temp_agent", "temp_role")
    assert (repo.path / ".thrum" / "identities" / "temp_agent.json").exists()
    out = repo.ok("agent", "delete", "@temp_agent").out
    assert out.startswith("> Agent deleted: @temp_agent\n")
    assert not (repo.path / ".thrum" / "identities" / "temp_agent.json").exists()
    assert "@temp_agent" not in repo.ok("agent", "list").out
    r = repo.run("send", "ghost", agent="temp_agent")
    assert r.code == 1
    assert "temp_agent" in r.err_line
    cleanup = repo.ok("agent", "cleanup").out  # everyone here was active just now
    assert cleanup == "No stale agents.\n"
