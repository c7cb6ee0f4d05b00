"""Identity files, name rules and the resolution order (thrum.identity)."""

from __future__ import annotations

import json

import pytest

from thrum import identity
from thrum.errors import IdentityError, ValidationError


@pytest.fixture
def ids(tmp_path):
    d = tmp_path / "identities"
    identity.write(d, identity.Identity("alice", "implementer", "auth", worktree="/w/a"))
    identity.write(d, identity.Identity("bob", "reviewer", "auth", worktree="/w/b"))
    identity.write(d, identity.Identity("carol", "implementer", "ui", worktree="/w/a"))
    return d


def test_write_and_load_roundtrip(tmp_path):
    d = tmp_path / "ids"
    path = identity.write(d, identity.Identity("alice", "implementer", "auth", "Alice"))
    assert path == d / "alice.json"
    data = json.loads(path.read_text())
    assert {"name", "role", "module", "display", "created_at"} <= set(data)
    assert data["created_at"].endswith("Z")
    loaded = identity.load(path)
    assert (loaded.name, loaded.role, loaded.module, loaded.display) == ("alice", "implementer", "auth", "Alice")
    assert identity.remove(d, "alice")
    assert not identity.remove(d, "alice")


@pytest.mark.parametrize("name", ["Alice", "al-ice", "", "a b", "ä", "x" * 65, "../etc"])
def test_bad_names_are_rejected(name):
    with pytest.raises(ValidationError) as exc:
        identity.check_identity(name, "implementer")
    assert exc.value.field == "name"


@pytest.mark.parametrize("name", ["daemon", "system", "thrum", "all", "broadcast"])
def test_reserved_names(name):
    with pytest.raises(ValidationError, match="reserved"):
        identity.check_name(name)


def test_name_must_differ_from_role():
    with pytest.raises(ValidationError, match="must differ"):
        identity.check_identity("reviewer", "reviewer")
    with pytest.raises(ValidationError) as exc:
        identity.check_identity("bob", "Bad Role")
    assert exc.value.field == "role"


def test_thrum_name_wins_over_everything(ids):
    env = {"THRUM_NAME": "bob", "THRUM_ROLE": "implementer", "THRUM_MODULE": "auth"}
    assert identity.resolve(ids, name="carol", role="implementer", env=env).name == "bob"


def test_thrum_role_and_module_select(ids):
    env = {"THRUM_ROLE": "implementer", "THRUM_MODULE": "ui"}
    assert identity.resolve(ids, name="bob", env=env).name == "carol"  # env before flags
    assert identity.resolve(ids, env={"THRUM_ROLE": "reviewer"}).name == "bob"


def test_thrum_role_ambiguous_lists_candidates(ids):
    with pytest.raises(IdentityError) as exc:
        identity.resolve(ids, env={"THRUM_ROLE": "implementer"})
    msg = str(exc.value)
    assert "@alice" in msg
    assert "@carol" in msg
    assert "THRUM_NAME" in msg


def test_flags_come_third(ids):
    assert identity.resolve(ids, name="bob", env={}).name == "bob"
    assert identity.resolve(ids, role="implementer", module="auth", env={}).name == "alice"
    assert identity.resolve(ids, module="ui", env={}).name == "carol"


def test_unknown_name_says_what_to_do(ids):
    with pytest.raises(IdentityError) as exc:
        identity.resolve(ids, env={"THRUM_NAME": "zed"})
    msg = str(exc.value)
    assert "zed" in msg
    assert "@alice" in msg
    assert "thrum quickstart --name zed" in msg
    with pytest.raises(IdentityError, match="no agent identity with role=tester"):
        identity.resolve(ids, role="tester", env={})


def test_single_file_is_auto_selected(tmp_path):
    d = tmp_path / "ids"
    identity.write(d, identity.Identity("solo", "implementer"))
    assert identity.resolve(d, env={}).name == "solo"


def test_none_or_many_without_selector(tmp_path, ids):
    with pytest.raises(IdentityError, match="thrum quickstart"):
        identity.resolve(tmp_path / "empty", env={})
    with pytest.raises(IdentityError) as exc:
        identity.resolve(ids, env={})
    assert "3 agent identities" in str(exc.value)
    assert "THRUM_NAME" in str(exc.value)


def test_worktree_breaks_ties(ids):
    assert identity.resolve(ids, env={}, worktree="/w/b").name == "bob"
    with pytest.raises(IdentityError):
        identity.resolve(ids, env={}, worktree="/w/a")  # alice and carol both registered there


def test_broken_files_are_skipped_in_lists_and_reported_by_name(tmp_path):
    d = tmp_path / "ids"
    identity.write(d, identity.Identity("alice", "implementer"))
    (d / "bad.json").write_text("{not json")
    assert [i.name for i in identity.list_identities(d)] == ["alice"]
    with pytest.raises(IdentityError, match="unreadable"):
        identity.resolve(d, env={"THRUM_NAME": "bad"})
