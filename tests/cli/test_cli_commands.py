"""The CLI end to end against a fake daemon: argument parsing, flag placement,
RPC params, output lines and exit codes (no real daemon)."""

from __future__ import annotations

import json

import pytest

from cli_helpers import write_identity
from cli_replies import (
    DELETED,
    DONE,
    EDITED,
    GROUPS,
    MEMBERS,
    MEMBERS_EXPANDED,
    MESSAGE,
    NO_AGENTS,
    NO_SESSIONS,
    SENT,
    SENT_PAGE,
    SENT_TO_ROLE,
    SESSION_ENDED,
    SESSION_STARTED,
    agent_registered,
    cleanup,
    inbox_result,
    m,
)
from thrum.errors import IdentityError, NotFound, UnknownRecipient


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("thrum: ")
    return lines[0]


# --------------------------------------------------------------------------- global flags


@pytest.mark.parametrize("args", [["--json", "inbox"], ["inbox", "--json"], ["--json", "inbox", "--json"]])
def test_json_flag_before_or_after(alice, daemon, cli, args):
    daemon.on("message.list", inbox_result(m("msg_A")))
    r = cli(*args)
    assert r.code == 0, r.err
    assert r.json()["messages"][0]["message_id"] == "msg_A"


@pytest.mark.parametrize(
    "args",
    [["--name", "bob", "send", "hi"], ["send", "hi", "--name", "bob"], ["--repo", ".", "send", "--name", "bob", "hi"]],
)
def test_identity_flags_before_or_after(alice, daemon, cli, args):
    write_identity(alice, "bob", "reviewer")
    daemon.on("message.send", SENT)
    r = cli(*args)
    assert r.code == 0, r.err
    assert daemon.calls("message.send")[0]["caller"] == "bob"


def test_quiet_and_verbose_flags(alice, daemon, cli):
    daemon.on("message.send", SENT)
    r = cli("-v", "send", "hi")
    assert r.code == 0
    assert "→ message.send" in r.err
    assert "← message.send ok" in r.err
    assert cli("send", "hi", "--quiet").err == ""


def test_repo_flag_points_elsewhere(alice, daemon, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    daemon.on("message.send", SENT)
    assert cli("send", "hi", "--repo", str(alice)).code == 0


# --------------------------------------------------------------------------- send


def test_send_maps_every_flag(alice, daemon, cli):
    daemon.on("message.send", SENT_TO_ROLE)
    r = cli(
        "send",
        "Auth done",
        "--to",
        "@reviewer",
        "--to",
        "backend",
        "--mention",
        "@lead",
        "--scope",
        "module:auth",
        "--ref",
        "issue:beads-42",
        "--ref",
        "url:https://x.y/z",
        "--format",
        "plain",
        "--priority",
        "critical",
        "--structured",
        '{"passed": 45}',
    )
    assert r.code == 0, r.err
    assert r.out == "> Message sent: msg_01NEW\n  To: @reviewer (role)\n"
    p = daemon.calls("message.send")[0]
    assert p.pop("idempotency_key").startswith("k_")  # every send carries one (thrum.client)
    assert p == {
        "caller": "alice",
        "content": "Auth done",
        "format": "plain",
        "priority": "critical",
        "structured": '{"passed": 45}',
        "to": ["reviewer", "backend"],
        "mentions": ["lead"],
        "scopes": [{"type": "module", "value": "auth"}],
        "refs": [{"type": "issue", "value": "beads-42"}, {"type": "url", "value": "https://x.y/z"}],
    }


def test_send_json_prints_the_rpc_result(alice, daemon, cli):
    daemon.on("message.send", SENT)
    r = cli("send", "hi", "--json")
    assert r.code == 0
    assert r.json() == SENT


def test_send_body_from_stdin_and_file(alice, daemon, cli, tmp_path):
    daemon.on("message.send", SENT)
    assert cli("send", "-", stdin="from stdin\n").code == 0
    f = tmp_path / "body.md"
    f.write_text("from file")
    assert cli("send", "--body-file", str(f)).code == 0
    assert [p["content"] for p in daemon.calls("message.send")] == ["from stdin\n", "from file"]


def test_send_broadcast_warns_and_addresses_everyone(alice, daemon, cli):
    daemon.on("message.send", SENT)
    r = cli("send", "Deploy complete", "--broadcast")
    assert r.code == 0
    assert "deprecated" in r.err
    assert "--to @everyone" in r.err
    assert daemon.calls("message.send")[0]["to"] == ["everyone"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["send", "x", "--structured", "{nope"], "--structured is not valid JSON"),
        (["send", "x", "--scope", "moduleauth"], "--scope expects type:value"),
        (["send", "x", "--ref", ":v"], "--ref expects type:value"),
        (["send", "x", "--format", "html"], "--format"),
        (["send", "x", "--priority", "urgent"], "--priority"),
        (["send"], "missing message"),
        (["send", ""], "empty"),
        (["send", "x", "--body-file", "y"], "not both"),
        (["send", "x", "--to", "@"], "--to needs"),
        (["message", "delete", "msg_A"], "--force"),
        (["message", "read"], "--all"),
        (["group", "add", "g"], "--role"),
        (["group", "add", "g", "@a", "--role", "r"], "not both"),
        (["inbox", "--page-size", "0"], "--page-size"),
        (["nosuchcommand"], "No such command"),
        (["quickstart", "--name", "x"], "--role ROLE"),
    ],
)
def test_usage_errors_exit_2_with_one_line_and_send_nothing(alice, daemon, cli, args, needle):
    r = cli(*args)
    assert r.code == 2, (r.out, r.err)
    assert needle in one_line(r.err)
    assert not [x for x in daemon.methods if x != "message.markRead"]


def test_unknown_recipient_lists_close_matches(alice, daemon, cli):
    def fail(_p):
        raise UnknownRecipient("unknown recipient @revewer", data={"close_matches": ["reviewer", "reviewers"]})

    daemon.on("message.send", fail)
    r = cli("send", "x", "--to", "@revewer")
    assert r.code == 1
    assert r.out == ""
    assert one_line(r.err) == "thrum: unknown recipient @revewer (did you mean: @reviewer, @reviewers?)"


def test_daemon_errors_exit_1_with_one_line(alice, daemon, cli):
    daemon.on("message.get", lambda p: (_ for _ in ()).throw(NotFound("message msg_X not found")))
    r = cli("message", "get", "msg_X")
    assert r.code == 1
    assert one_line(r.err) == "thrum: message msg_X not found"


def test_no_daemon_and_no_autostart_is_a_clear_error(alice, cli):
    r = cli("send", "hi")
    assert r.code == 1
    assert "THRUM_NO_AUTOSTART=1" in one_line(r.err)
    assert "thrum daemon start" in r.err


def test_not_a_repository(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("inbox")
    assert r.code == 1
    assert "not a git repository" in one_line(r.err)


def test_not_initialised(tmp_path, cli, monkeypatch):
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    r = cli("inbox")
    assert r.code == 1
    assert "thrum init" in one_line(r.err)


def test_identity_problems_exit_1(repo, daemon, cli):
    r = cli("send", "hi")
    assert r.code == 1
    assert "thrum quickstart" in one_line(r.err)
    write_identity(repo, "alice", "implementer")
    write_identity(repo, "bob", "reviewer")
    r = cli("send", "hi")
    assert r.code == 1
    assert "@alice" in one_line(r.err)
    assert "@bob" in r.err


def test_unknown_caller_is_registered_from_its_file_then_retried(alice, daemon, cli):
    state = {"known": False}

    def send(p):
        if not state["known"]:
            raise IdentityError("unknown agent alice")
        return SENT

    def register(p):
        state["known"] = True
        return agent_registered(p)

    daemon.on("message.send", send)
    daemon.on("agent.register", register)
    assert cli("send", "hi").code == 0
    assert daemon.methods == ["message.send", "agent.register", "message.send"]
    assert daemon.calls("agent.register")[0] == {
        "name": "alice",
        "role": "implementer",
        "module": "auth",
        "worktree": "main",
    }


# --------------------------------------------------------------------------- reply, inbox


def test_reply_output_and_marks_parent_read(alice, daemon, cli):
    daemon.on("message.send", SENT)
    r = cli("reply", "msg_PARENT", "Looks good", "--format", "plain")
    assert r.code == 0
    assert r.out == "> Reply sent: msg_01NEW\n  In reply to: msg_PARENT\n"
    assert daemon.calls("message.send")[0]["reply_to"] == "msg_PARENT"
    assert daemon.calls("message.markRead") == [{"caller": "alice", "message_ids": ["msg_PARENT"]}]


def test_reply_succeeds_when_mark_read_fails(alice, daemon, cli):
    daemon.on("message.send", SENT)
    daemon.on("message.markRead", lambda p: (_ for _ in ()).throw(NotFound("gone")))
    assert cli("reply", "msg_P", "ok").code == 0


def test_inbox_default_params_render_and_auto_mark_read(alice, daemon, cli):
    daemon.on("message.list", inbox_result(m("msg_A"), m("msg_B", read=True)))
    r = cli("inbox")
    assert r.code == 0
    assert daemon.calls("message.list")[0] == {
        "caller": "alice",
        "exclude_own": True,
        "page_size": 10,
        "page": 1,
        "sort_by": "created_at",
        "sort_order": "desc",
    }
    assert "│ ● msg_A  @bob" in r.out
    assert "│ ○ msg_B  @bob" in r.out
    assert r.out.splitlines()[-1] == "Showing 1-2 of 2 messages (1 unread)"
    assert daemon.calls("message.markRead") == [{"caller": "alice", "message_ids": ["msg_A"]}]


def test_inbox_unread_does_not_mark(alice, daemon, cli):
    daemon.on("message.list", inbox_result(m("msg_A")))
    assert cli("inbox", "--unread").code == 0
    assert daemon.calls("message.list")[0]["unread"] is True
    assert daemon.calls("message.markRead") == []


def test_inbox_filters_and_empty_state(alice, daemon, cli):
    def listing(p):
        if "scope" in p:
            return inbox_result()
        return inbox_result(total=15)

    daemon.on("message.list", listing)
    r = cli("inbox", "--scope", "module:auth", "--mentions", "--page-size", "5", "--page", "2")
    assert r.code == 0
    p = daemon.calls("message.list")[0]
    assert p["scope"] == {"type": "module", "value": "auth"}
    assert p["mentions"] is True
    assert (p["page_size"], p["page"]) == (5, 2)
    assert r.out == (
        "No messages matching filter --scope module:auth --mentions\n"
        "Showing 0 of 15 total messages (filter: scope=module:auth, mentions)\n"
    )


def test_inbox_empty(alice, daemon, cli):
    daemon.on("message.list", inbox_result())
    assert cli("inbox").out == "No messages in inbox.\n"


# --------------------------------------------------------------------------- message subcommands


def test_message_get_marks_read(alice, daemon, cli):
    daemon.on("message.get", MESSAGE)
    r = cli("message", "get", "msg_A")
    assert r.code == 0
    assert r.out.startswith("Message: msg_A\n  From:    @bob\n")
    assert daemon.calls("message.markRead") == [{"caller": "alice", "message_ids": ["msg_A"]}]


def test_message_edit_delete_read_outputs(alice, daemon, cli):
    daemon.on("message.edit", EDITED)
    daemon.on("message.delete", DELETED)
    daemon.on("message.markRead", lambda p: {"marked_count": 3 if p.get("all") else len(p["message_ids"])})
    assert cli("message", "edit", "msg_A", "new text").out == "> Message edited: msg_A (version 2)\n"
    edit = daemon.calls("message.edit")[0]
    assert edit.pop("idempotency_key").startswith("k_")
    assert edit == {"caller": "alice", "message_id": "msg_A", "content": "new text"}
    assert cli("message", "delete", "msg_A", "--force").out == "> Message deleted: msg_A\n"
    assert cli("message", "read", "msg_1", "msg_2", "msg_3").out == "> Marked 3 messages as read\n"
    assert cli("message", "read", "--all").out == "> Marked 3 messages as read\n"
    assert daemon.calls("message.markRead")[-1] == {"caller": "alice", "all": True}
    assert cli("message", "read", "msg_1").out == "> Marked 1 message as read\n"


def test_sent(alice, daemon, cli):
    daemon.on("message.sent", SENT_PAGE)
    r = cli("sent")
    assert r.code == 0
    assert "Read by: @bob" in r.out


# --------------------------------------------------------------------------- groups, agents, sessions


def test_group_commands_map_to_rpc(alice, daemon, cli):
    for method in ("group.create", "group.delete", "group.member.add", "group.member.remove"):
        daemon.on(method, DONE)
    assert (
        cli("group", "create", "reviewers", "--description", "Code review team").out == "> Group created: @reviewers\n"
    )
    assert cli("group", "add", "@reviewers", "@bob").out == "> Added @bob to @reviewers\n"
    assert cli("group", "add", "reviewers", "--role", "reviewer").out == "> Added role reviewer to @reviewers\n"
    assert cli("group", "remove", "reviewers", "--role", "reviewer").out == "> Removed role reviewer from @reviewers\n"
    assert cli("group", "delete", "reviewers").out == "> Group deleted: @reviewers\n"
    assert daemon.calls("group.create")[0] == {
        "caller": "alice",
        "name": "reviewers",
        "description": "Code review team",
    }
    assert daemon.calls("group.member.add") == [
        {"caller": "alice", "group": "reviewers", "member": "bob", "member_type": "agent"},
        {"caller": "alice", "group": "reviewers", "member": "reviewer", "member_type": "role"},
    ]


def test_group_list_info_members(alice, daemon, cli):
    daemon.on("group.list", GROUPS)
    daemon.on("group.members", lambda p: MEMBERS_EXPANDED if p.get("expand") else MEMBERS)
    assert "@everyone" in cli("group", "list").out
    assert cli("group", "members", "g").out == "role:implementer\n"
    assert cli("group", "members", "g", "--expand").out == "@alice\n"


def test_quickstart_writes_identity_registers_and_starts_session(repo, daemon, cli):
    daemon.on("agent.register", agent_registered)
    daemon.on("session.start", SESSION_STARTED)
    r = cli("quickstart", "--name", "alice", "--role", "implementer", "--module", "auth", "--display", "Alice")
    assert r.code == 0, r.err
    assert r.out.startswith(
        "> Agent registered: @alice (role: implementer, module: auth)\n"
        "  Identity: .thrum/identities/alice.json\n  Session:  ses_1\n"
    )
    data = json.loads((repo / ".thrum/identities/alice.json").read_text())
    assert (data["name"], data["role"], data["module"], data["display"]) == ("alice", "implementer", "auth", "Alice")
    assert daemon.calls("agent.register")[0]["name"] == "alice"
    assert daemon.calls("session.start") == [{"caller": "alice"}]


def test_quickstart_rejects_bad_names_before_any_rpc(repo, daemon, cli):
    r = cli("quickstart", "--name", "daemon", "--role", "implementer")
    assert r.code == 1
    assert "reserved" in one_line(r.err)
    r = cli("quickstart", "--name", "reviewer", "--role", "reviewer")
    assert r.code == 1
    assert "must differ" in one_line(r.err)
    assert daemon.methods == []
    assert not list((repo / ".thrum/identities").iterdir())


def test_whoami_without_daemon(alice, cli):
    r = cli("whoami")
    assert r.code == 0
    assert r.out.startswith("Agent:   @alice\nRole:    implementer\nModule:  auth\n")
    assert cli("whoami", "--json").json()["name"] == "alice"


def test_agent_list_filters_are_local_options(alice, daemon, cli):
    daemon.on("agent.list", NO_AGENTS)
    assert cli("agent", "list", "--role", "reviewer").out == "No agents registered.\n"
    assert daemon.calls("agent.list") == [{"role": "reviewer"}]


def test_agent_cleanup_dry_run_and_force(alice, daemon, cli):
    daemon.on("agent.cleanup", cleanup)
    assert cli("agent", "cleanup").out.startswith("Would remove 1 agent: @old\n")
    assert cli("agent", "cleanup", "--force").out == "> Removed 1 agent: @old\n"


def test_session_commands(alice, daemon, cli):
    daemon.on("session.start", SESSION_STARTED)
    daemon.on("session.end", SESSION_ENDED)
    daemon.on("session.list", NO_SESSIONS)
    assert cli("session", "start").out == "> Session started: ses_1 (@alice)\n"
    assert cli("session", "end").out == "> Session ended: ses_1 (normal)\n"
    assert cli("session", "list").out == "No sessions.\n"
    assert daemon.calls("session.list") == [{"agent": "alice"}]


def test_help_for_every_command(cli):
    from thrum.cli.main import COMMANDS, cli as group
    import click

    ctx = click.Context(group)
    for name in COMMANDS:
        cmd = group.get_command(ctx, name)
        assert cmd.help, name
        for sub in getattr(cmd, "commands", {}).values():
            assert sub.help, f"{name} {sub.name}"
            for p in sub.params:
                if isinstance(p, click.Option):
                    assert p.help, f"{name} {sub.name} {p.name}"
        for p in cmd.params:
            if isinstance(p, click.Option):
                assert p.help, f"{name} {p.name}"
        r = cli(name, "--help")
        assert r.code == 0
        assert "Usage: thrum " + name in r.out
