"""Issue 9 through the installed ``thrum``: what a new user trips over, tried as one."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from e2e_helpers import THRUM, TIMEOUT, base_env

MSG_ID = re.compile(r"msg_[0-9A-Za-z_-]+")


@pytest.fixture(scope="module")
def repo(repo_factory):
    r = repo_factory("correct")
    r.agent("alice", "implementer", "auth")
    r.agent("bob", "reviewer", "auth")
    r.agent("carol", "tester", "ui")
    return r


def test_a_reply_reaches_the_author_in_inbox_mentions_and_wakes_wait(repo):
    repo.agent("ann", "asker")  # nobody else mentions her
    waiter = subprocess.Popen(
        [THRUM, "wait", "--mentions", "--timeout", "30", "--json"],
        cwd=repo.path,
        env=base_env(THRUM_NAME="ann"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ask = repo.send("ann", "Please review PR #42", "--to", "@reviewer")
        answer = repo.ok("reply", ask, "Looks good", "--json", agent="bob").json()
        assert {"address": "@ann", "kind": "agent"} in answer["recipients"]
        out, err = waiter.communicate(timeout=TIMEOUT)
    finally:
        waiter.kill()
    assert waiter.returncode == 0, (out, err)
    assert [m["message_id"] for m in json.loads(out)["messages"]] == [answer["message_id"]]
    inbox = repo.ok("inbox", "--mentions", "--unread", agent="ann").out
    assert answer["message_id"] not in inbox  # `thrum wait` printed it and marked it read
    assert answer["message_id"] in repo.ok("inbox", "--mentions", agent="ann").out


def test_following_the_next_page_hint_keeps_the_filters(repo):
    for i in range(5):
        repo.send("alice", f"page item {i}", "--to", "@carol", "--scope", "t:pages")
    first = repo.ok("inbox", "--unread", "--mentions", "--scope", "t:pages", "--page-size", "2", agent="carol").out
    hint = first.splitlines()[-1]
    assert hint == "Next page: thrum inbox --scope t:pages --mentions --unread --page-size 2 --page 2"
    second = repo.ok(*hint.removeprefix("Next page: thrum ").split(), agent="carol").out
    assert len(MSG_ID.findall(second)) == 2 and second.splitlines()[-2] == "Showing 3-4 of 5 messages (5 unread)"
    assert repo.ok("inbox", "--unread", "--scope", "t:pages", "--json", agent="carol").json()["total"] == 5


def test_short_ids_work_like_gits(repo):
    mid = repo.send("alice", "find me by a prefix", "--scope", "t:prefix")
    got = repo.ok("message", "get", mid[:16], agent="bob").out
    assert got.startswith(f"Message: {mid}\n")
    r = repo.run("message", "get", "msg_0", agent="bob")
    assert r.code == 1 and "not found" in r.err_line and "at least 4 characters" in r.err_line
    other = repo.send("alice", "another", "--scope", "t:prefix")
    common = next(mid[:i] for i in range(len(mid), 4, -1) if other.startswith(mid[:i]))
    r = repo.run("message", "get", common, agent="bob")
    assert r.code == 1 and "ambiguous" in r.err_line and mid in r.err_line and other in r.err_line


def test_errors_with_json_are_one_object_on_stdout(repo):
    r = repo.run("message", "get", "msg_01NOSUCHMESSAGE0000000000", "--json", agent="bob")
    assert r.code == 1 and r.err == ""
    assert json.loads(r.out)["error"]["code"] == -32001
    r = repo.run("send", "not json", "--format", "json", "--json", agent="alice")
    assert r.code == 1 and r.err == ""
    error = json.loads(r.out)["error"]
    assert error["data"]["field"] == "content" and "not valid JSON" in error["message"]


def test_a_mistyped_command_suggests_the_closest(repo):
    r = repo.run("inbx")
    assert r.code == 2 and "did you mean 'inbox'" in r.err_line


def test_agent_list_shows_when_each_agent_was_last_seen(repo):
    repo.ok("inbox", "--quiet", agent="bob")
    row = next(line for line in repo.ok("agent", "list").out.splitlines() if line.startswith("@bob"))
    assert row.rstrip().endswith("just now")
    agents = {a["name"]: a for a in repo.ok("agent", "list", "--json").json()["agents"]}
    assert agents["bob"]["last_seen_at"] and agents["bob"]["worktree"] == "main"


def test_names_that_would_shadow_an_address_are_refused(repo):
    for args, needle in (
        (["--name", "everyone", "--role", "helper"], "built-in group"),
        (["--name", "reviewer", "--role", "helper"], "already a role"),
    ):
        r = repo.run("quickstart", *args)
        assert r.code == 1 and needle in r.err_line
    assert not (repo.path / ".thrum" / "identities" / "everyone.json").exists()
    assert "@everyone" not in repo.ok("agent", "list").out
