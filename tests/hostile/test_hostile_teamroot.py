"""The team root on a real team: `thrum team init` and `show`, and `sync status` saying which
trust applies (docs/design/trust.md, "The team root")."""

from __future__ import annotations

from hostile_helpers import git, team_with_history


def test_team_init_writes_a_root_that_counts_only_once_committed_on_main(team):
    t, a, b = team_with_history(team)
    status = a.json("sync", "status")
    assert status["team"]["trust"] == "tofu"
    assert "trust on first use" in a.run("sync", "status").stdout

    made = a.json("team", "init")
    assert set(made["admins"]) == {"alice"} and set(made["members"]) == {"bob"}
    assert made["policy"] == "admins" and made["log_id"].startswith("log_")
    again = a.run("team", "init", check=False)
    assert again.returncode == 1 and "exists" in again.stderr and len(again.stderr.splitlines()) == 1

    shown = a.json("team", "show")
    assert shown["root"] is None and shown["checkout_differs"] is True  # not committed: not in effect
    assert "differs from the committed one" in a.run("team", "show").stdout

    git(a, "checkout", "-q", "-b", "side")
    git(a, "add", "thrum-team.toml")
    git(a, "commit", "-q", "-m", "team root, on a side branch")
    assert a.json("team", "show")["root"] is None  # a side branch does not count, even checked out
    assert a.json("sync", "status")["team"]["trust"] == "tofu"

    git(a, "checkout", "-q", "main")
    git(a, "merge", "-q", "--ff-only", "side")
    shown = a.json("team", "show")
    assert shown["root"]["admins"] == made["admins"] and shown["checkout_differs"] is False
    assert shown["ref"] == "refs/heads/main"
    status = a.json("sync", "status")
    assert status["team"]["trust"] == "team-root" and status["team"]["log_id"] == made["log_id"]
    text = a.run("team", "show").stdout
    assert f"Log id:   {made['log_id']}" in text and "alice (" in text and "bob (" in text

    # the other replica sees it once it has the commit on its own main
    git(a, "push", "-q", "origin", "main")
    assert b.json("team", "show")["root"] is None
    git(b, "pull", "-q", "--ff-only", "origin", "main")
    assert b.json("team", "show")["root"]["log_id"] == made["log_id"]
