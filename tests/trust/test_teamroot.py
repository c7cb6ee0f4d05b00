"""The team root file: a strict parser (untrusted input), and only the committed version
on the project's normal branch counts (docs/design/trust.md, "The team root")."""

from __future__ import annotations


import pygit2
import pytest

from fixtures.repos.builders import AUTHOR, clone, make_bare, make_repo
from thrum.sync.gitstore.libgit2 import LibGit2Store
from thrum.sync.teamfile import normal_branch, read_committed_root, worktree_copy_differs
from thrum.trust import keys
from thrum.trust.teamroot import (
    MAX_BYTES,
    TeamRoot,
    TeamRootError,
    new_log_id,
    parse_team_root,
    render_team_root,
)


def key() -> keys.PublicKey:
    return keys.PublicKey(keys.public_raw(keys.generate()))


def good(**over) -> str:
    a, b = key(), key()
    text = (
        "version = 1\n"
        f'log_id = "{new_log_id()}"\n'
        'policy = "admins"\n'
        f'[admins]\nalice = "{a.b64}"\n'
        f'[members]\nbob = "{b.b64}"\n'
    )
    return text


def test_render_then_parse_round_trips():
    root = TeamRoot(log_id=new_log_id(), policy="open", admins={"alice": key()}, members={"bob": key()})
    again = parse_team_root(render_team_root(root))
    assert again == root
    assert again.is_admin("alice") and not again.is_admin("bob")
    assert again.admitted_key("bob") == root.members["bob"]


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda t: t.replace("version = 1", "version = 2"), "newer than this thrum"),
        (lambda t: t.replace("version = 1", 'version = "1"'), "'version' must be an integer"),
        (lambda t: t.replace('policy = "admins"', 'policy = "anyone"'), "'policy' must be one of"),
        (lambda t: t.replace('log_id = "log_', 'log_id = "lug_'), "'log_id' must be"),
        (lambda t: "extra = 1\n" + t, "unknown key 'extra'"),
        (lambda t: t.replace("alice =", '"Alice" ='), "is not an agent name"),
        (lambda t: t.replace('alice = "', 'alice = "x'), "admins] alice: public_key"),
        (lambda t: t.replace("[admins]\n", "[admins]\n").split("[admins]")[0] + "[admins]\n", "at least one"),
        (lambda t: t + "[[", "not valid TOML"),
    ],
)
def test_a_bad_root_is_one_line_naming_the_problem(mutate, words):
    with pytest.raises(TeamRootError) as info:
        parse_team_root(mutate(good()))
    message = str(info.value)
    assert words in message and "\n" not in message and message.startswith("thrum-team.toml: ")


def test_oversized_and_non_utf8_roots_are_refused_before_parsing():
    with pytest.raises(TeamRootError, match="at most"):
        parse_team_root(b"#" * (MAX_BYTES + 1))
    with pytest.raises(TeamRootError, match="not UTF-8"):
        parse_team_root(b"version = 1\n\xff\n")


# ---------------------------------------------------------------------------- which version counts


def commit_file(repo: pygit2.Repository, branch: str, name: str, data: bytes, parent=None) -> pygit2.Oid:
    base = parent if parent is not None else repo.references[f"refs/heads/{branch}"].peel(pygit2.Commit)
    builder = repo.TreeBuilder(base.tree)
    builder.insert(name, repo.create_blob(data), pygit2.enums.FileMode.BLOB)
    return repo.create_commit(f"refs/heads/{branch}", AUTHOR, AUTHOR, f"{name}\n", builder.write(), [base.id])


def test_only_the_committed_file_on_the_normal_branch_counts(tmp_path):
    repo = make_repo(tmp_path / "r")
    assert read_committed_root(tmp_path / "r").root is None  # trust on first use
    text = good().encode()
    # an uncommitted file in the checkout does not count
    (tmp_path / "r" / "thrum-team.toml").write_bytes(text)
    seen = read_committed_root(tmp_path / "r")
    assert seen.root is None and seen.ref == "refs/heads/main"
    assert worktree_copy_differs(tmp_path / "r", seen) is True
    # committed on a side branch, even checked out: does not count
    main = repo.references["refs/heads/main"].peel(pygit2.Commit)
    repo.create_branch("side", main)
    commit_file(repo, "side", "thrum-team.toml", text)
    repo.checkout("refs/heads/side", strategy=pygit2.enums.CheckoutStrategy.FORCE)
    assert repo.head.shorthand == "side"
    assert read_committed_root(tmp_path / "r").root is None
    # merged into main: counts
    repo.references["refs/heads/main"].set_target(repo.references["refs/heads/side"].target)
    seen = read_committed_root(tmp_path / "r")
    assert seen.root == parse_team_root(text)
    assert seen.commit == str(repo.references["refs/heads/main"].target)
    assert worktree_copy_differs(tmp_path / "r", seen) is False


def test_the_normal_branch_is_the_remotes_head_then_main(tmp_path):
    bare = make_bare(tmp_path / "remote.git", with_commit=True)
    root_text = good().encode()
    commit_file(bare, "main", "thrum-team.toml", root_text)
    bare.create_branch("trunk", bare.references["refs/heads/main"].peel(pygit2.Commit))
    other = good().encode()
    commit_file(bare, "trunk", "thrum-team.toml", other)
    local = clone(tmp_path / "remote.git", tmp_path / "c")
    assert normal_branch(LibGit2Store(tmp_path / "c")) == "main"
    assert read_committed_root(tmp_path / "c").root == parse_team_root(root_text)
    # the remote names trunk as its HEAD: that is the normal branch, read from the
    # remote-tracking ref when there is no local branch of that name
    local.remotes["origin"].fetch()
    local.references.create("refs/remotes/origin/HEAD", "refs/remotes/origin/trunk", force=True)
    seen = read_committed_root(tmp_path / "c")
    assert seen.ref == "refs/remotes/origin/trunk" and seen.root == parse_team_root(other)


def test_a_hostile_committed_root_is_an_error_not_a_crash(tmp_path):
    repo = make_repo(tmp_path / "r")
    commit_file(repo, "main", "thrum-team.toml", b"x" * (MAX_BYTES + 10))
    seen = read_committed_root(tmp_path / "r")
    assert seen.root is None and "at most" in seen.error
    commit_file(repo, "main", "thrum-team.toml", b"policy = 3\n")
    seen = read_committed_root(tmp_path / "r")
    assert seen.root is None and seen.error.startswith("thrum-team.toml: ")
    # a link is not the file
    main = repo.references["refs/heads/main"].peel(pygit2.Commit)
    builder = repo.TreeBuilder(main.tree)
    builder.insert("thrum-team.toml", repo.create_blob(b"/etc/passwd"), pygit2.enums.FileMode.LINK)
    repo.create_commit("refs/heads/main", AUTHOR, AUTHOR, "link\n", builder.write(), [main.id])
    seen = read_committed_root(tmp_path / "r")
    assert seen.root is None and "not a regular file" in seen.error
