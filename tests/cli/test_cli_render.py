"""Exact-string tests of the pure renderers (thrum.cli.render)."""

from __future__ import annotations

from datetime import datetime, timezone

from thrum.cli.render.directory import render_agents, render_group_info, render_groups, render_members
from thrum.cli.render.messages import archived_note, next_page_command, render_inbox, render_message, render_sent
from thrum.cli.render.status import render_daemon_status, render_sync_status
from thrum.cli.render.text import duration, relative_time

NOW = datetime(2026, 2, 3, 16, 0, 0, tzinfo=timezone.utc)


def msg(mid, author, created, content, *, read=False, updated="", reply_to=None, **extra):
    m = {
        "message_id": mid,
        "agent_id": author,
        "created_at": created,
        "updated_at": updated,
        "body": {"format": "markdown", "content": content, "structured": ""},
        "deleted": False,
        "is_read": read,
        **extra,
    }
    if reply_to:
        m["refs"] = [{"type": "reply_to", "value": reply_to}]
    return m


def test_relative_time_buckets():
    assert relative_time("2026-02-03T15:59:30Z", NOW) == "just now"
    assert relative_time("2026-02-03T15:55:00Z", NOW) == "5m ago"
    assert relative_time("2026-02-03T14:59:59.900Z", NOW) == "1h ago"
    assert relative_time("2026-02-03T15:00:00+00:00", NOW) == "1h ago"
    assert relative_time("2026-02-01T16:00:00Z", NOW) == "2d ago"
    assert relative_time("2026-01-02T16:00:00Z", NOW) == "Jan 2"
    assert relative_time("2025-01-02T16:00:00Z", NOW) == "Jan 2 2025"
    assert relative_time("2026-02-03T17:00:00Z", NOW) == "just now"  # clock skew
    assert relative_time("garbage", NOW) == "garbage"


def test_duration():
    assert duration(45) == "45s"
    assert duration(312) == "5m 12s"
    assert duration(7380.5) == "2h 3m"
    assert duration(3 * 86400 + 4 * 3600) == "3d 4h"


def test_inbox_box_headers_replies_and_footer():
    result = {
        "messages": [
            msg("msg_C", "implementer", "2026-02-03T15:50:00Z", "Thanks!", reply_to="msg_A"),
            msg("msg_B", "reviewer", "2026-02-03T15:00:00Z", "Second", read=True, updated="2026-02-03T15:30:00Z"),
            msg("msg_A", "implementer", "2026-02-03T14:00:00Z", "Auth module complete"),
        ],
        "total": 23,
        "unread": 3,
        "page": 1,
        "page_size": 10,
        "total_pages": 3,
    }
    out = render_inbox(result, width=40, now=NOW)
    lines = out.splitlines()
    assert lines[:6] == [
        "┌──────────────────────────────────────────┐",
        "│ ○ msg_B  @reviewer     1h ago  (edited)  │",
        "│ Second                                   │",
        "├──────────────────────────────────────────┤",
        "│ ● msg_A  @implementer  2h ago            │",
        "│ Auth module complete                     │",
    ]
    assert lines[6] == "│ ↳ msg_C  @implementer  10m ago  (unread) │"
    assert lines[7].startswith("│   Thanks!")
    assert lines[-1] == "Showing 1-3 of 23 messages (3 unread)"
    # every box line has the same width
    widths = {len(line) for line in lines[:-1]}
    assert len(widths) == 1


def test_inbox_exact_small_box():
    result = {
        "messages": [msg("msg_A", "bob", "2026-02-03T15:55:00Z", "hi", read=False)],
        "total": 1,
        "unread": 1,
        "page": 1,
        "page_size": 10,
    }
    assert render_inbox(result, width=40, now=NOW) == (
        "┌────────────────────────────────────────┐\n"
        "│ ● msg_A  @bob  5m ago                  │\n"
        "│ hi                                     │\n"
        "└────────────────────────────────────────┘\n"
        "Showing 1-1 of 1 message (1 unread)"
    )


def test_inbox_footer_page_two():
    result = {
        "messages": [msg(f"msg_{i}", "bob", "2026-02-03T15:55:00Z", "x", read=True) for i in range(3)],
        "total": 13,
        "unread": 0,
        "page": 2,
        "page_size": 10,
    }
    assert render_inbox(result, width=40, now=NOW).splitlines()[-1] == "Showing 11-13 of 13 messages (0 unread)"


def test_inbox_wraps_long_bodies_and_keeps_paragraphs():
    body = "word " * 30 + "\n\nsecond paragraph"
    result = {
        "messages": [msg("msg_A", "bob", "2026-02-03T15:55:00Z", body)],
        "total": 1,
        "unread": 1,
        "page": 1,
        "page_size": 10,
    }
    lines = render_inbox(result, width=40, now=NOW).splitlines()
    assert all(len(line) == 42 for line in lines[:-1])
    assert "│                                        │" in lines  # the blank line between paragraphs
    assert lines[-3].startswith("│ second paragraph")


def test_inbox_long_body_is_cut_with_a_hint():
    body = "\n".join(f"line {i}" for i in range(100))
    result = {
        "messages": [msg("msg_A", "bob", "2026-02-03T15:55:00Z", body)],
        "total": 1,
        "unread": 1,
        "page": 1,
        "page_size": 10,
    }
    out = render_inbox(result, width=60, now=NOW, body_lines=5)
    assert "│ line 4 " in out
    assert "line 5 " not in out
    assert "… 95 more lines (thrum message get msg_A)" in out


def test_inbox_reply_chain_is_grouped_under_root_oldest_first():
    result = {
        "messages": [
            msg("msg_D", "x", "2026-02-03T15:59:00Z", "d", reply_to="msg_C"),
            msg("msg_C", "y", "2026-02-03T15:58:00Z", "c", reply_to="msg_A"),
            msg("msg_B", "z", "2026-02-03T15:57:00Z", "b"),
            msg("msg_A", "x", "2026-02-03T15:56:00Z", "a"),
        ],
        "total": 4,
        "unread": 4,
        "page": 1,
        "page_size": 10,
    }
    headers = [line for line in render_inbox(result, width=50, now=NOW).splitlines() if "msg_" in line]
    assert [h.split()[2] for h in headers] == ["msg_B", "msg_A", "msg_C", "msg_D"]
    assert "↳ msg_C" in headers[2]
    assert "↳ msg_D" in headers[3]


def test_inbox_orphan_reply_names_its_parent():
    result = {
        "messages": [msg("msg_C", "y", "2026-02-03T15:58:00Z", "c", reply_to="msg_OLD", read=True)],
        "total": 1,
        "unread": 0,
        "page": 1,
        "page_size": 10,
    }
    lines = render_inbox(result, width=40, now=NOW).splitlines()
    assert lines[1:4] == [
        "│ " + "↳ msg_C  @y  2m ago".ljust(39) + "│",
        "│ " + "  in reply to msg_OLD".ljust(39) + "│",
        "│ " + "  c".ljust(39) + "│",
    ]


def test_inbox_reply_to_field_also_groups():
    a = msg("msg_A", "x", "2026-02-03T15:56:00Z", "a")
    b = msg("msg_B", "y", "2026-02-03T15:57:00Z", "b", read=True)
    b["reply_to"] = "msg_A"
    out = render_inbox({"messages": [b, a], "total": 2, "unread": 1, "page": 1, "page_size": 10}, width=50, now=NOW)
    assert out.index("● msg_A") < out.index("↳ msg_B")


def test_inbox_escapes_control_characters():
    result = {
        "messages": [msg("msg_A", "bob", "2026-02-03T15:55:00Z", "evil \x1b[2J text")],
        "total": 1,
        "unread": 1,
        "page": 1,
        "page_size": 10,
    }
    out = render_inbox(result, width=40, now=NOW)
    assert "\x1b" not in out
    assert "\\x1b[2J" in out


def test_inbox_empty_states_match_the_spec():
    empty = {"messages": [], "total": 0, "unread": 0, "page": 1, "page_size": 10}
    assert render_inbox(empty) == "No messages in inbox."
    assert render_inbox(empty, filters=[("scope", "module:auth")], unfiltered_total=15) == (
        "No messages matching filter --scope module:auth\nShowing 0 of 15 total messages (filter: scope=module:auth)"
    )
    assert render_inbox(empty, filters=[("mentions", None), ("unread", None)], unfiltered_total=4) == (
        "No messages matching filter --mentions --unread\nShowing 0 of 4 total messages (filter: mentions, unread)"
    )


def test_inbox_page_past_the_end():
    out = render_inbox({"messages": [], "total": 12, "unread": 0, "page": 5, "page_size": 10, "total_pages": 2})
    assert out == "No messages on page 5 (12 messages, 2 pages)"


def test_message_get_block_matches_the_spec():
    m = {
        "message_id": "msg_01HXE",
        "author": {"agent_id": "implementer", "session_id": "ses_1"},
        "body": {"format": "markdown", "content": "Auth module complete, all tests passing", "structured": ""},
        "scopes": [{"type": "module", "value": "auth"}],
        "refs": [{"type": "issue", "value": "beads-42"}, {"type": "mention", "value": "reviewer"}],
        "metadata": {"deleted_at": "", "delete_reason": ""},
        "created_at": "2026-02-03T15:55:00Z",
        "updated_at": "2026-02-03T15:58:00Z",
        "deleted": False,
    }
    assert render_message(m, now=NOW) == (
        "Message: msg_01HXE\n"
        "  From:    @implementer\n"
        "  Time:    5m ago\n"
        "  Scopes:  module:auth\n"
        "  Refs:    issue:beads-42, mention:reviewer\n"
        "  Edited:  2m ago\n"
        "\n"
        "Auth module complete, all tests passing"
    )


def test_message_get_deleted_and_structured():
    m = {
        "message_id": "msg_X",
        "author": {"agent_id": "bob"},
        "created_at": "2026-02-03T15:00:00Z",
        "updated_at": "",
        "deleted": True,
        "metadata": {"delete_reason": "oops"},
        "body": {"format": "plain", "content": "", "structured": '{"passed": 45}'},
        "priority": "high",
        "read_by": ["alice"],
    }
    out = render_message(m, now=NOW)
    assert "  From:     @bob\n  Time:     1h ago\n  Status:   DELETED\n  Reason:   oops\n" in out
    assert "  Priority: high\n" in out
    assert out.endswith('Structured:\n{\n  "passed": 45\n}')
    assert "Edited" not in out


def test_sent_shows_recipients_and_readers():
    result = {
        "messages": [
            {
                **msg("msg_A", "me", "2026-02-03T15:55:00Z", "ping", read=True),
                "refs": [{"type": "mention", "value": "reviewer"}],
                "read_by": ["bob", "carol"],
            },
            {**msg("msg_B", "me", "2026-02-03T15:56:00Z", "pong", read=True), "read_by": []},
        ],
        "total": 2,
        "page": 1,
        "page_size": 10,
    }
    out = render_sent(result, width=50, now=NOW)
    assert "│ msg_A  to @reviewer  5m ago" in out
    assert "│ Read by: @bob, @carol" in out
    assert "│ Read by: nobody yet" in out
    assert out.splitlines()[-1] == "Showing 1-2 of 2 sent messages"
    assert render_sent({"messages": [], "total": 0}) == "No sent messages."


def test_agents_table():
    out = render_agents(
        [
            {
                "agent_id": "alice",
                "name": "alice",
                "role": "implementer",
                "module": "auth",
                "display": "Alice",
                "active_sessions": 0,
                "status": "idle",  # the daemon's (thrum.presence), shown as it says, not derived from sessions
                "last_seen_at": "2026-02-03T15:55:00Z",
            },
            {"agent_id": "bob", "name": "bob", "role": "reviewer", "module": "", "active_sessions": 1},
        ],
        now=NOW,
        me="alice",
    )
    assert out == (
        "AGENT         ROLE         MODULE  DISPLAY  STATUS   LAST SEEN\n"
        "@alice (you)  implementer  auth    Alice    idle     5m ago\n"
        "@bob          reviewer     -       -        offline  -"
    )
    assert render_agents([]) == "No agents registered."


def test_groups_and_members():
    assert render_groups(
        [
            {"name": "everyone", "description": "All agents", "member_count": 3, "builtin": True},
            {"name": "reviewers", "description": "Code review team", "member_count": 2},
        ]
    ) == (
        "GROUP       MEMBERS  DESCRIPTION\n"
        "@everyone   3        All agents (built-in)\n"
        "@reviewers  2        Code review team"
    )
    assert (
        render_members({"members": [{"type": "agent", "value": "alice"}, {"type": "role", "value": "reviewer"}]})
        == "@alice\nrole:reviewer"
    )
    assert render_members({"agents": ["alice", "bob"]}) == "@alice\n@bob"
    assert render_members({"agents": [{"type": "agent", "value": "alice"}]}) == "@alice"
    assert render_members({"members": []}) == "No members."
    info = render_group_info(
        {
            "name": "reviewers",
            "description": "Code review team",
            "created_by": "alice",
            "created_at": "2026-02-03T15:00:00Z",
            "members": [{"type": "role", "value": "reviewer"}],
        },
        now=NOW,
    )
    assert info == (
        "Group: @reviewers\n"
        "  Description: Code review team\n"
        "  Created:     1h ago by @alice\n"
        "  Members:     role:reviewer"
    )


def test_daemon_status_text():
    out = render_daemon_status(
        {"running": True, "pid": 42, "uptime": 312, "socket": "/r/.thrum/var/thrum.sock", "repo": "/r"}
    )
    assert out == ("Daemon:  running (pid 42, up 5m 12s)\nSocket:  /r/.thrum/var/thrum.sock\nRepo:    /r")
    assert render_daemon_status({"running": False, "repo": "/r"}) == "Daemon:  not running\nRepo:    /r"


def test_inbox_pads_id_and_author_columns_like_the_spec():
    result = {
        "messages": [
            msg("msg_01HXF1", "reviewer", "2026-02-03T15:00:00Z", "b", read=True, updated="2026-02-03T15:30:00Z"),
            msg("msg_01HXE", "implementer", "2026-02-03T15:55:00Z", "a"),
        ],
        "total": 2,
        "unread": 1,
        "page": 1,
        "page_size": 10,
    }
    headers = [line for line in render_inbox(result, width=60, now=NOW).splitlines() if "msg_" in line]
    assert headers[0].startswith("│ ○ msg_01HXF1  @reviewer     1h ago  (edited)")
    assert headers[1].startswith("│ ● msg_01HXE   @implementer  5m ago")


def test_footers_say_one_message_not_one_messages():
    empty = {"messages": [], "total": 0, "unread": 0, "page": 1, "page_size": 10}
    assert render_inbox(empty, filters=[("unread", None)], unfiltered_total=1).endswith(
        "Showing 0 of 1 total message (filter: unread)"
    )
    sent = {
        "messages": [msg("msg_A", "me", "2026-02-03T15:55:00Z", "x", read=True)],
        "total": 1,
        "page": 1,
        "page_size": 10,
    }
    assert render_sent(sent, width=40, now=NOW).splitlines()[-1] == "Showing 1-1 of 1 sent message"


def test_message_get_aligns_priority_with_the_other_labels():
    m = {
        "message_id": "msg_X",
        "author": {"agent_id": "bob"},
        "created_at": "2026-02-03T15:55:00Z",
        "updated_at": "",
        "deleted": False,
        "priority": "high",
        "scopes": [{"type": "module", "value": "z"}, {"type": "feature", "value": "a"}],
        "body": {"format": "markdown", "content": "hi", "structured": ""},
    }
    lines = render_message(m, now=NOW).splitlines()
    assert lines[1:5] == [
        "  From:     @bob",
        "  Time:     5m ago",
        "  Scopes:   module:z, feature:a",
        "  Priority: high",
    ]
    values = {line.index(line.split()[1]) for line in lines[1:5]}
    assert values == {12}


def test_next_page_command_repeats_every_filter_in_use():
    cmd = next_page_command([("scope", "module:auth"), ("mentions", None), ("unread", None)], page=2, page_size=3)
    assert cmd == "thrum inbox --scope module:auth --mentions --unread --page-size 3 --page 2"
    assert next_page_command([], page=3, page_size=10) == "thrum inbox --page 3"
    assert (
        next_page_command([("scope", "file:my notes.md")], page=2, page_size=10, context=[("name", "alice")])
        == "thrum inbox --name alice --scope 'file:my notes.md' --page 2"
    )
    assert (
        next_page_command(
            [], page=2, page_size=5, context=[("repo", "/tmp/my repo"), ("role", "reviewer")], command="thread list"
        )
        == "thrum thread list --repo '/tmp/my repo' --role reviewer --page-size 5 --page 2"
    )


def test_archived_note_of_message_unread():
    assert archived_note(1, of=1) == "it is archived and stays out of the inbox (`thrum inbox --archived` lists it)"
    assert archived_note(2, of=2) == "they are archived and stay out of the inbox (`thrum inbox --archived` lists them)"
    assert archived_note(2, of=5).startswith("2 of them are archived and stay out of the inbox")


def test_search_results_in_the_inbox_box_with_marked_hits():
    from thrum.cli.render.search import render_search

    first = msg("msg_A", "bob", "2026-02-03T15:55:00Z", "x", subject="Crash", priority="high")
    first["snippet"] = [
        {"text": "…fixed the ", "hit": False},
        {"text": "parse_config", "hit": True},
        {"text": " crash", "hit": False},
    ]
    first["subject_snippet"] = [{"text": "Crash", "hit": True}]
    second = msg("msg_BB", "carol", "2026-02-01T16:00:00Z", "y", read=True)
    second["snippet"] = [
        {"text": "evil \x1b[2J ", "hit": False},
        {"text": "parse", "hit": True},
        {"text": "_config", "hit": False},
    ]
    second["subject_snippet"] = []
    result = {"messages": [first, second], "total": 12, "page": 2, "page_size": 2}

    def row(text: str) -> str:
        return "│ " + text.ljust(59) + "│"

    assert render_search(result, query="parse_config", width=60, now=NOW) == "\n".join(
        [
            "┌" + "─" * 60 + "┐",
            row("● msg_A   @bob    5m ago  [high]"),
            row("Subject: «Crash»"),
            row("…fixed the «parse_config» crash"),
            "├" + "─" * 60 + "┤",
            row("○ msg_BB  @carol  2d ago"),
            row("evil \\x1b[2J «parse»_config"),  # a terminal escape in a message is shown, not sent
            "└" + "─" * 60 + "┘",
            "Showing 3-4 of 12 matches",
        ]
    )
    assert render_search({"messages": [], "total": 0}, query="zebra", now=NOW) == (
        "No message matches 'zebra'. Searched: your inbox's messages (not deleted, not archived; "
        "is:archived searches your archive)."
    )
    assert render_search({"messages": [], "total": 5, "page": 9}, query="z", now=NOW) == (
        "No results on page 9: 5 messages match 'z'."
    )


def test_sync_status_names_the_trust_in_effect_once():
    """`thrum sync status` says team root or trust on first use, never both (a retired key is
    listed under the team root)."""
    base = {"mode": "remote", "remote": "origin", "last_success": None}
    rooted = render_sync_status(
        {
            **base,
            "team": {
                "trust": "team-root",
                "policy": "admins",
                "source": "thrum-team.toml on main",
                "retired": [{"name": "bob", "key": "0123456789abcdef", "why": "revoked by @alice"}],
            },
        }
    )
    trust = [line for line in rooted.splitlines() if line.startswith("Trust:")]
    assert trust == ["Trust:         team root (admins policy; thrum-team.toml on main)"]
    assert "Retired key:   bob 0123456789ab… revoked by @alice" in rooted.splitlines()
    tofu = render_sync_status({**base, "team": {"trust": "tofu"}})
    assert [line for line in tofu.splitlines() if line.startswith("Trust:")] == [
        "Trust:         trust on first use (no team root: thrum team init)"
    ]
