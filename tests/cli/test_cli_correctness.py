"""Issue 9 in the CLI against a fake daemon: the next-page hint, --json errors,
closest commands, exit statuses, reply addresses and the worktree name."""

from __future__ import annotations

import json

import pytest

from thrum import paths as thrum_paths
from thrum.errors import NotFound, UnknownRecipient

from cli_helpers import write_identity


def _page(n_messages: int, *, page: int, page_size: int, total: int) -> dict:
    messages = [
        {
            "message_id": f"msg_{page}_{i}",
            "agent_id": "bob",
            "created_at": "2026-02-03T15:00:00Z",
            "updated_at": "",
            "body": {"format": "markdown", "content": "x", "structured": ""},
            "deleted": False,
            "is_read": False,
        }
        for i in range(n_messages)
    ]
    return {
        "messages": messages,
        "total": total,
        "unread": total,
        "page": page,
        "page_size": page_size,
        "total_pages": -(-total // page_size),
    }


def test_next_page_hint_repeats_the_filters_in_use(alice, daemon, cli):
    daemon.on("message.list", lambda p: _page(3, page=p["page"], page_size=p["page_size"], total=7))
    r = cli("inbox", "--unread", "--scope", "module:auth", "--mentions", "--page-size", "3")
    assert r.code == 0
    hint = r.out.splitlines()[-1]
    assert hint == "Next page: thrum inbox --scope module:auth --mentions --unread --page-size 3 --page 2"
    # following the hint asks for the same list and, with --unread, still marks nothing read
    args = hint.removeprefix("Next page: thrum ").split()
    assert cli(*args).code == 0
    first, second = daemon.calls("message.list")
    assert {k: v for k, v in second.items() if k != "page"} == {k: v for k, v in first.items() if k != "page"}
    assert second["page"] == 2 and daemon.calls("message.markRead") == []


def test_next_page_hint_keeps_an_explicit_name(alice, daemon, cli):
    write_identity(alice, "bob", "reviewer")
    daemon.on("message.list", lambda p: _page(10, page=1, page_size=10, total=11))
    r = cli("inbox", "--name", "alice")
    assert r.out.splitlines()[-1] == "Next page: thrum inbox --name alice --page 2"


def test_json_errors_are_one_json_object_on_stdout(alice, daemon, cli):
    daemon.on("message.get", lambda p: (_ for _ in ()).throw(NotFound("message msg_X not found")))
    r = cli("message", "get", "msg_X", "--json")
    assert r.code == 1 and r.err == ""
    assert json.loads(r.out) == {"error": {"code": -32001, "message": "message msg_X not found", "data": {}}}

    daemon.on(
        "message.send",
        lambda p: (_ for _ in ()).throw(
            UnknownRecipient("unknown recipient 'revewer'", data={"address": "revewer", "close_matches": ["@reviewer"]})
        ),
    )
    r = cli("--json", "send", "hi", "--to", "@revewer")
    assert r.code == 1 and r.err == ""
    err = json.loads(r.out)["error"]
    assert err["code"] == -32004 and err["data"]["close_matches"] == ["@reviewer"]


def test_json_usage_errors_keep_exit_status_2(alice, daemon, cli):
    r = cli("send", "--json", "--scope", "nocolon", "hi")
    assert r.code == 2 and r.err == ""
    err = json.loads(r.out)["error"]
    assert err["code"] == -32602 and "type:value" in err["message"] and err["data"]["usage"] is True


def test_json_error_without_a_daemon(alice, cli):
    r = cli("inbox", "--json")
    assert r.code == 1 and r.err == ""
    assert json.loads(r.out)["error"]["code"] == -32008  # Unavailable


@pytest.mark.parametrize(
    "args, suggestion",
    [
        (["inbx"], "'inbox'"),
        (["mesage", "get", "x"], "'message'"),
        (["message", "gett", "x"], "'get'"),
        (["daemon", "stauts"], "'status'"),
    ],
)
def test_a_mistyped_command_suggests_the_closest(cli, repo, args, suggestion):
    r = cli(*args)
    assert r.code == 2
    line = r.err.strip()
    assert line.startswith("thrum: No such command") and f"did you mean {suggestion}" in line, line


def test_daemon_status_exits_3_when_not_running(alice, cli):
    r = cli("daemon", "status")
    assert r.code == 3 and "not running" in r.out
    r = cli("daemon", "status", "--json")
    assert r.code == 3 and r.json()["running"] is False


def test_reply_passes_explicit_addresses_and_prints_the_full_parent_id(alice, daemon, cli):
    daemon.on(
        "message.send",
        {
            "message_id": "msg_01NEW",
            "thread_id": "thr_1",
            "created_at": "x",
            "session_id": "ses_1",
            "reply_to": "msg_01PARENTFULL",
            "recipients": [{"address": "@bob", "kind": "agent"}],
        },
    )
    r = cli("reply", "msg_01PAR", "ok", "--to", "@carol", "--mention", "reviewer")
    assert r.code == 0
    sent = daemon.calls("message.send")[0]
    assert sent["reply_to"] == "msg_01PAR" and sent["to"] == ["carol"] and sent["mentions"] == ["reviewer"]
    assert r.out == "> Reply sent: msg_01NEW\n  In reply to: msg_01PARENTFULL\n"
    assert daemon.calls("message.markRead")[0]["message_ids"] == ["msg_01PARENTFULL"]


def test_worktree_name_is_main_or_the_linked_worktrees_name(tmp_path):
    main = tmp_path / "main"
    (main / ".git" / "worktrees" / "feature_x").mkdir(parents=True)
    assert thrum_paths.worktree_name(main) == "main"
    linked = tmp_path / "elsewhere" / "checkout"
    linked.mkdir(parents=True)
    (linked / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'feature_x'}\n")
    assert thrum_paths.worktree_name(linked) == "feature_x"
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / ".git").write_text("gitdir: ../main/.git/modules/sub\n")
    assert thrum_paths.worktree_name(sub) == "main"


def test_registration_sends_the_worktree_name_not_the_checkout_path(repo, daemon, cli):
    daemon.on("agent.register", lambda p: {"agent": p, "created": True, "updated": False})
    daemon.on("session.start", {"session_id": "ses_1", "agent_id": "alice", "started_at": "x"})
    assert cli("quickstart", "--name", "alice", "--role", "implementer").code == 0
    assert daemon.calls("agent.register")[0]["worktree"] == "main"
    assert str(repo) not in json.dumps(daemon.requests)
