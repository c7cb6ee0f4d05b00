"""``thrum search`` through the installed executable, against the real daemon (issue 26)."""

from __future__ import annotations

import shlex

import pytest


@pytest.fixture(scope="module")
def repo(repo_factory):
    r = repo_factory("search")
    r.agent("alice", "implementer", "auth")
    r.agent("bob", "reviewer", "auth")
    return r


def test_search_prints_the_inbox_box_with_snippets_and_an_exact_total(repo):
    fix = repo.send(
        "bob", "Fixed the parse_config crash in thrum/store/fold.py", "--to", "@alice", "--subject", "Crash"
    )
    repo.send("bob", "Lunch at noon?", "--to", "@alice")
    out = repo.ok("search", "parse_config", agent="alice").out
    lines = out.splitlines()
    assert lines[0].startswith("┌") and lines[-1] == "Showing 1-1 of 1 match"
    assert lines[1].startswith(f"│ ● {fix}  @bob")
    assert "│ Subject: Crash" in out
    assert "Fixed the «parse_config» crash in thrum/store/fold.py" in out
    # the parts of an identifier and of a path find it too; searching marks nothing read
    assert fix in repo.ok("search", "store", "fold.py", agent="alice").out
    assert fix in repo.ok("inbox", "--unread", agent="alice").out
    # --as, --json, and a word to leave out (taken as a query word, not an option)
    data = repo.ok("search", "--as", "alice", "--json", "crash", "-lunch").json()
    assert [m["message_id"] for m in data["messages"]] == [fix] and data["total"] == 1
    assert {"text": "Crash", "hit": True} in data["messages"][0]["subject_snippet"]
    assert repo.ok("search", "-crash", "from:bob", "--json", agent="alice").json()["total"] == 1


def test_paging_hint_and_an_empty_result(repo):
    for i in range(3):
        repo.send("bob", f"nightly build {i} is red", "--to", "@alice")
    first = repo.ok("search", "nightly build", "--page-size", "2", agent="alice").out
    hint = first.splitlines()[-1]
    assert hint == "Next page: thrum search 'nightly build' --page 2 --page-size 2"
    second = repo.ok(*shlex.split(hint.removeprefix("Next page: thrum ")), agent="alice").out
    assert second.splitlines()[-1] == "Showing 3-3 of 3 matches"
    none = repo.ok("search", "zebra", agent="alice").out.strip()
    assert none.startswith("No message matches 'zebra'.")


def test_a_bad_query_is_one_line_on_stderr_and_exit_1(repo):
    r = repo.run("search", '"unclosed phrase', agent="alice")
    assert r.code == 1 and r.out == ""
    assert r.err_line == 'thrum: invalid params: invalid query: unbalanced quote: the " at character 1 is never closed'
    r = repo.run("search", "colour:red", "--json", agent="alice")
    assert r.code == 1 and r.json()["error"]["data"] == {"field": "query"}
