"""A daemon writes nothing with a key it knows is retired: after an agent's key was revoked
(or rotated away on another machine), every write in its name is refused with one clear
error before anything is appended; such a line would only be quarantined as ``revoked`` by
every replica and fail `thrum verify` on an honest push. A rotation done here keeps
working: the new key signs."""

from __future__ import annotations

import json
import os
import time

import pytest

from fixtures.repos.builders import make_repo
from fixtures.thrum_cli import run_thrum
from thrum import errors, identity, lifecycle
from thrum import events as ev
from thrum.trust.keys import decode_public
from thrum.trust.signing import verify

from daemon_helpers import RawClient, register


@pytest.fixture
def bus(shared_daemon):
    """The module's daemon (conftest's ``shared_daemon``): each test uses agents of its own."""
    return shared_daemon


@pytest.fixture
def c(shared):
    return shared


def _lines_by(paths, agent: str) -> list[dict]:
    """Every line of the log signed by ``agent`` (seals included)."""
    out = []
    for f in sorted((paths.main_repo / ".git" / "thrum-sync" / "a-sync").rglob("*.jsonl")):
        for line in f.read_bytes().splitlines():
            d = json.loads(line)
            if (d.get("sig") or {}).get("by") == agent:
                out.append(d)
    return out


def _refused(c: RawClient, method: str, params: dict) -> dict:
    reply = c.request(method, params)
    assert "error" in reply, f"{method} was accepted: {reply.get('result')}"
    return reply["error"]


def _revoked(c: RawClient, agent: str) -> str:
    """``agent`` revokes its own key from now on; the revocation's point."""
    point = ev.new_ulid()
    c.call("team.revoke", {"caller": agent, "name": agent, "from_event": point})
    return point


def test_every_write_of_a_revoked_agent_is_refused_and_nothing_is_appended(bus, c):
    register(c, "rk_alice", "rk_impl")
    register(c, "rk_dave", "rk_test")
    asked = c.call("message.send", {"caller": "rk_alice", "content": "ping", "to": ["@rk_dave"]})
    c.call("group.create", {"caller": "rk_dave", "name": "rk_squad"})
    _revoked(c, "rk_dave")
    before = _lines_by(bus, "rk_dave")
    attempts = [
        ("message.send", {"caller": "rk_dave", "content": "hello", "to": ["@rk_alice"]}),
        ("message.send", {"caller": "rk_dave", "content": "pong", "reply_to": asked["message_id"]}),
        ("group.member.add", {"caller": "rk_dave", "group": "rk_squad", "member_type": "agent", "member": "rk_alice"}),
        ("group.create", {"caller": "rk_dave", "name": "rk_other"}),
        ("message.markRead", {"caller": "rk_dave", "message_ids": [asked["message_id"]]}),
        ("agent.rotate_key", {"caller": "rk_dave"}),  # signed with the revoked key: it would not count
    ]
    for method, params in attempts:
        err = _refused(c, method, params)
        assert err["code"] == errors.KEY_RETIRED, (method, err)
        text = err["message"]
        assert "\n" not in text
        assert "rk_dave" in text and "revoked by rk_dave" in text, text
        assert "nothing was written" in text, text
        assert "thrum team invite rk_dave" in text, text  # what to do, with the real command
        assert err["data"]["agent"] == "rk_dave" and err["data"]["point"], err
    assert _lines_by(bus, "rk_dave") == before
    # the daemon keeps serving, and an agent whose key stands still writes
    c.call("message.send", {"caller": "rk_alice", "content": "still here", "to": ["@rk_dave"]})
    # a key may still revoke itself from an earlier point (a theft found out late), as every replica accepts
    earlier = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    c.call("team.revoke", {"caller": "rk_dave", "name": "rk_dave", "since": earlier})


def test_the_cli_prints_one_line_and_exits_non_zero(bus, c):
    register(c, "rk_erin", "rk_cli")
    identity.write(bus.identities, identity.Identity(name="rk_erin", role="rk_cli", module="core"))
    _revoked(c, "rk_erin")
    before = _lines_by(bus, "rk_erin")
    env = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    done = run_thrum(["send", "hello", "--to", "@rk_cli", "--name", "rk_erin"], cwd=bus.main_repo, env=env)
    assert done.returncode == 1, done
    err = done.stderr.strip()
    assert "\n" not in err and err.startswith("thrum: "), err
    assert "revoked by rk_erin" in err and "thrum team invite rk_erin" in err, err
    assert _lines_by(bus, "rk_erin") == before


def test_revoking_since_now_from_the_cli_stops_the_next_write(bus, c):
    """`--since now`: a key found lost this moment, without typing the time."""
    register(c, "rk_nora", "rk_now")
    identity.write(bus.identities, identity.Identity(name="rk_nora", role="rk_now", module="core"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    bad = run_thrum(["team", "revoke", "rk_nora", "--since", "soon", "--name", "rk_nora"], cwd=bus.main_repo, env=env)
    assert bad.returncode != 0 and "'soon' is not a time" in bad.stderr and "or now" in bad.stderr, bad
    done = run_thrum(["team", "revoke", "rk_nora", "--since", "now", "--name", "rk_nora"], cwd=bus.main_repo, env=env)
    assert done.returncode == 0, done
    sent = run_thrum(["send", "hello", "--to", "@rk_now", "--name", "rk_nora"], cwd=bus.main_repo, env=env)
    assert sent.returncode == 1 and "revoked by rk_nora" in sent.stderr, sent


def test_a_rotation_here_keeps_the_agent_writing_with_its_new_key(bus, c):
    register(c, "rk_fay", "rk_rot")
    rotated = c.call("agent.rotate_key", {"caller": "rk_fay"})
    sent = c.call("message.send", {"caller": "rk_fay", "content": "new key", "to": ["@rk_rot"]})
    line = next(d for d in _lines_by(bus, "rk_fay") if d.get("message_id") == sent["message_id"])
    assert verify(line, decode_public(rotated["public_key"]))
    assert not verify(line, decode_public(rotated["old_key"]))


async def test_a_write_queued_behind_the_revocation_of_its_key_is_refused(tmp_path, monkeypatch):
    """The revocation and the write share a group commit: the revocation is folded (and its
    fact learned) before the write is signed, so the write is refused, not appended."""
    import trio

    from thrum import config
    from thrum.daemon.startup import open_store
    from thrum.trust.keys import LocalKeys

    repo = tmp_path / "repo"
    make_repo(repo)
    monkeypatch.setenv("THRUM_LOCAL", "1")
    paths = lifecycle.init_repo(repo, start_daemon=False)
    keys = LocalKeys(paths.identities)
    _, public = keys.create("dave")
    store = await trio.to_thread.run_sync(open_store, paths, config.load(paths.config), keys)
    writer = store.writer
    revoke = ev.AgentRevoke(agent_id="dave", by="dave", public_key=public.b64, from_event=ev.new_ulid())
    later = ev.GroupCreate(name="squad", created_by="dave")
    outcome: dict[str, object] = {}
    both = trio.Event()

    async def put(name: str, event: ev.Event) -> None:
        try:
            await writer.write([event])
            outcome[name] = "written"
        except errors.ThrumError as exc:
            outcome[name] = exc
        if len(outcome) == 2:
            both.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(put, "revoke", revoke)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(put, "later", later)
            await trio.testing.wait_all_tasks_blocked()  # both queued: the writer takes them as one batch
            await nursery.start(writer.run_writer)
            with trio.fail_after(20):
                await both.wait()
            nursery.cancel_scope.cancel()
    finally:
        writer.close()
    assert outcome["revoke"] == "written"
    assert isinstance(outcome["later"], errors.KeyRetired), outcome
    assert not [d for d in _lines_by(paths, "dave") if d["type"] == "group.create"]


def test_under_a_root_an_admins_invite_re_admits_a_revoked_agent_with_a_new_key(tmp_path, monkeypatch):
    """What the refusal advises works: the admin invites the agent again, redeeming the
    code here gives it a new key (the revoked one kept beside it), it writes again, and
    `thrum verify` passes the whole log as every replica would judge it."""
    from fixtures.repos.builders import signature
    from thrum.trust.keys import LocalKeys
    from thrum.trust.teamroot import FILE_NAME, TeamRoot, new_log_id, render_team_root

    repo = tmp_path / "repo"
    git = make_repo(repo)
    monkeypatch.setenv("THRUM_LOCAL", "1")
    monkeypatch.setenv("THRUM_WS_PORT", "0")
    paths = lifecycle.init_repo(repo, start_daemon=False)
    local = LocalKeys(paths.identities)
    admin, old = local.create("alice")[1], local.create("dave")[1]
    root = TeamRoot(log_id=new_log_id(), policy="admins", admins={"alice": admin}, members={"dave": old})
    (repo / FILE_NAME).write_text(render_team_root(root))
    git.index.add(FILE_NAME)
    git.index.write()
    git.create_commit("HEAD", signature(), signature(), "thrum team root", git.index.write_tree(), [git.head.target])
    lifecycle.start(paths)
    c = RawClient(paths)
    try:
        register(c, "alice", "lead")
        register(c, "dave", "tester")
        c.call("message.send", {"caller": "dave", "content": "before", "to": ["@alice"]})
        c.call("team.revoke", {"caller": "alice", "name": "dave", "from_event": ev.new_ulid()})
        err = _refused(c, "message.send", {"caller": "dave", "content": "refused", "to": ["@alice"]})
        assert err["code"] == errors.KEY_RETIRED and "revoked by alice" in err["message"], err
        assert "`thrum team invite dave`" in err["message"] and "--invite CODE" in err["message"], err
        code = c.call("team.invite", {"caller": "alice", "name": "dave"})["code"]
        c.call("agent.register", {"name": "dave", "role": "tester", "invite": code})
        new = LocalKeys(paths.identities).get("dave")
        assert new is not None and new[1] != old
        assert len(list(paths.identities.glob("dave.key.retired-*"))) == 1  # the revoked key, kept
        sent = c.call("message.send", {"caller": "dave", "content": "back", "to": ["@alice"]})
        line = next(d for d in _lines_by(paths, "dave") if d.get("message_id") == sent["message_id"])
        assert verify(line, new[1])
        c.call("sync.run", {})
        env = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
        checked = run_thrum(["verify", "--repo", str(repo)], cwd=repo, env=env)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        c.close()
        lifecycle.stop(paths)
