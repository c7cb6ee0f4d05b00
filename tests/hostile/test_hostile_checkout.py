"""A `.thrum/` that git put there, or that another user owns, is never used (issue 31,
finding 2).

The attack: anyone who can get a branch in front of a teammate (a pull request is
enough) commits ``.thrum/identities/alice.{json,key}`` (``git add -f``) with a key of
their own. When the teammate checks the branch out, git writes those files into
the ignored ``.thrum/``. Before the fix the replica took the planted key as alice's
("local identities always win"): the attacker's lines were applied as alice's and
the real alice's refused. A tracked ``.thrum/config.json`` chose where the log goes.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from thrum import events as ev
from thrum.trust import keys, signing

from hostile_helpers import GIT_ENV, forge, team_with_history


def _git(cwd, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(cwd)}
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def _push_branch(t, branch: str, files: dict[str, bytes]) -> None:
    """Mallory pushes a code branch that commits ``files`` (forced past .gitignore)."""
    work = t.base / f"mallory-code-{branch}"
    _git(t.base, "clone", "--quiet", "--no-local", "--branch", "main", str(t.remote), str(work))  # see Attacker
    for rel, data in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    _git(work, "add", "-f", *files)
    _git(work, "commit", "--quiet", "-m", "a harmless-looking change")
    _git(work, "push", "--quiet", "origin", f"HEAD:{branch}")


def _checkout(m, branch: str) -> None:
    """The teammate looks at the branch with plain git."""
    _git(m.path, "fetch", "--quiet", "origin", branch)
    _git(m.path, "checkout", "--quiet", "-b", branch, f"origin/{branch}")


def _planted_alice(tmp_path) -> tuple[dict[str, bytes], keys.LocalKeys]:
    own = keys.LocalKeys(tmp_path / "mallory-keys")
    own.create("alice")
    ident = {"name": "alice", "role": "implementer", "module": "core", "display": "", "created_at": "", "worktree": ""}
    files = {
        ".thrum/identities/alice.json": json.dumps(ident).encode(),
        ".thrum/identities/alice.key": (tmp_path / "mallory-keys" / "alice.key").read_bytes(),
    }
    return files, own


def _contents(m, agent: str) -> set[str]:
    listed = m.rpc("message.list", {"caller": agent, "page_size": 100})["messages"]
    return {x["body"]["content"] for x in listed}


def test_a_tracked_identity_is_never_used(team, tmp_path):
    t, a, b = team_with_history(team)
    files, own = _planted_alice(tmp_path)
    _push_branch(t, "feature", files)
    mallory = t.attacker()
    # mallory speaks as alice with the planted key, on a-sync (the id bound to that key)
    fake = ev.MessageCreate(
        agent_id="alice",
        session_id=ev.new_id("ses"),
        body=ev.Body("alice never said this"),
        message_id=signing.new_message_id(own.get("alice")[1].tag),
    )
    rel = mallory.file_of("messages", "bob").replace("bob", "alice")
    mallory.write(rel, forge(fake.to_dict(), "alice", tmp_path / "mallory-keys" / "alice.key"))
    mallory.push()

    _checkout(b, "feature")
    for args in (("inbox",), ("send", "hi", "--to", "@alice"), ("sync",)):
        refused = b.run(*args, agent="bob", check=False)
        assert refused.returncode != 0, args
        assert refused.stderr.count("\n") == 1, refused.stderr
        assert ".thrum/identities/alice.key is tracked by git" in refused.stderr
    doctor = b.run("doctor", check=False)
    assert doctor.returncode == 1 and "FAIL" in doctor.stdout and "tracked by git" in doctor.stdout
    restarted = b.run("daemon", "restart", check=False)
    assert restarted.returncode != 0 and "tracked by git" in restarted.stderr

    # The daemon that was running never takes the planted key either: its syncs judge
    # alice's lines by the key it learned, and it will not sign as alice.
    a.run("send", "the real alice", "--to", "@bob", agent="alice")
    a.sync()
    b.rpc("sync.run")
    seen = _contents(b, "bob")
    assert "the real alice" in seen and "alice never said this" not in seen
    with pytest.raises(Exception, match="tracked by git"):
        b.rpc("message.send", {"caller": "alice", "content": "as alice", "to": ["@bob"]})

    # Back on the main branch git removes the planted files, and thrum works again.
    _git(b.path, "checkout", "--quiet", "main")
    assert b.run("inbox", agent="bob").returncode == 0


def test_a_tracked_config_never_chooses_the_remote(team):
    t, a, b = team_with_history(team)
    _push_branch(t, "docs", {".thrum/config.json": b'{"remote": "upstream", "sync_interval": 1}\n'})
    _checkout(b, "docs")
    refused = b.run("sync", check=False)
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1
    assert ".thrum/config.json is tracked by git" in refused.stderr
    assert "tracked by git" in b.run("daemon", "restart", check=False).stderr


def test_a_key_file_is_used_only_when_it_is_private_and_the_users_own(team):
    t, a, b = team_with_history(team)
    key = a.paths.identities / "alice.key"
    a.run("daemon", "stop")
    os.chmod(key, 0o644)
    a.run("daemon", "start")  # a key is vetted when the daemon loads it
    failed = a.run("send", "with a readable key", "--to", "@bob", agent="alice", check=False)
    assert failed.returncode != 0 and failed.stderr.count("\n") == 1
    assert "alice.key" in failed.stderr and "0600" in failed.stderr
    os.chmod(key, 0o600)
    if os.getuid() == 0:  # another user's key file (root can make one)
        os.chown(key, 65534, 65534)
        a.run("daemon", "restart")
        failed = a.run("send", "with someone else's key", "--to", "@bob", agent="alice", check=False)
        assert failed.returncode != 0 and "alice.key" in failed.stderr and "another user" in failed.stderr
        os.chown(key, 0, 0)
    a.run("daemon", "restart")
    assert a.run("send", "with my own key", "--to", "@bob", agent="alice").returncode == 0


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give files to another user")
def test_a_thrum_directory_of_another_user_is_never_used(team):
    t, a, b = team_with_history(team)
    a.run("daemon", "stop")
    os.chown(a.paths.identities, 65534, 65534)
    for args in (("inbox",), ("daemon", "start")):
        refused = a.run(*args, agent="alice", check=False)
        assert refused.returncode != 0 and "another user" in refused.stderr, args
    doctor = a.run("doctor", check=False)
    assert doctor.returncode == 1 and "another user" in doctor.stdout
    os.chown(a.paths.identities, 0, 0)
    assert a.run("inbox", agent="alice").returncode == 0
