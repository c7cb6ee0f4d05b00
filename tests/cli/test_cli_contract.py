"""The fake daemon's replies (cli_replies.py) against the real daemon's, call for call.

The CLI tests run against a fake daemon, so what they prove about output depends
on the fake replying as the daemon does. This test makes each call the CLI makes
against a real daemon and checks that every field of the fake reply is in the
real one, with the same JSON type (recursively; a list's first items are
compared). A field the fake invents, or one the daemon renamed, fails here.
"""

from __future__ import annotations

import json

import pytest

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
    marked,
)
from fixtures.repos.builders import make_repo
from thrum import lifecycle


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), type(value).__name__)


def differences(fake: object, real: object, path: str = "reply") -> list[str]:
    """Where ``fake`` has a field ``real`` lacks, or a value of another JSON type."""
    if _kind(fake) != _kind(real):
        return [f"{path}: fake has {_kind(fake)}, daemon sends {_kind(real)}"]
    if isinstance(fake, dict):
        out = []
        for key, value in fake.items():
            if key not in real:
                out.append(f"{path}.{key}: not in the daemon's reply (it has {', '.join(sorted(real))})")
            else:
                out += differences(value, real[key], f"{path}.{key}")
        return out
    if isinstance(fake, list) and fake and real:
        return differences(fake[0], real[0], f"{path}[0]")
    return []


def test_differences_sees_invented_fields_and_other_types():
    assert differences({"a": 1, "b": [{"c": "x"}]}, {"a": 2, "b": [{"c": "y", "d": 1}], "e": 0}) == []
    assert differences({"a": "1", "z": 0}, {"a": 1}) == [
        "reply.a: fake has string, daemon sends number",
        "reply.z: not in the daemon's reply (it has a)",
    ]
    assert differences({"l": [{"k": 1}]}, {"l": [{}]}) == ["reply.l[0].k: not in the daemon's reply (it has )"]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """A real daemon with alice (implementer) and bob (reviewer), and a group."""
    repo = tmp_path_factory.mktemp("contract") / "repo"
    make_repo(repo)
    paths = lifecycle.init_repo(repo, start_daemon=False)
    paths.config.write_text(json.dumps({"local_only": True, "ws_port": 0}))
    lifecycle.start(paths)

    def call(method: str, params: dict) -> dict:
        return lifecycle.call(paths, method, params, timeout=30)

    yield call
    lifecycle.stop(paths)


def _same_shape(fake: dict, real: dict) -> None:
    assert differences(fake, real) == []


def test_agents_and_sessions(real):
    params = {"name": "alice", "role": "implementer", "module": "auth"}
    _same_shape(agent_registered(params), real("agent.register", params))
    real("agent.register", {"name": "bob", "role": "reviewer", "module": "auth"})
    real("agent.register", {"name": "old", "role": "retired", "module": ""})
    _same_shape(SESSION_STARTED, real("session.start", {"caller": "alice"}))
    sessions = real("session.list", {"agent": "alice"})
    _same_shape(NO_SESSIONS, sessions)
    assert sessions["sessions"]  # so the fake's (empty) list is compared with something
    _same_shape(SESSION_ENDED, real("session.end", {"caller": "alice"}))
    agents = real("agent.list", {"role": "reviewer"})
    _same_shape(NO_AGENTS, agents)
    _same_shape(cleanup({"force": False}), real("agent.cleanup", {"older_than_days": 0}))


def test_messages(real):
    sent = real("message.send", {"caller": "bob", "content": "hello", "to": ["@alice"]})
    _same_shape(SENT, sent)
    _same_shape(SENT_TO_ROLE, real("message.send", {"caller": "alice", "content": "review?", "to": ["@reviewer"]}))
    mid = sent["message_id"]
    page = real("message.list", {"caller": "alice", "page_size": 10})
    _same_shape(inbox_result(m("msg_A")), page)
    assert page["messages"]
    _same_shape(MESSAGE, real("message.get", {"message_id": mid, "caller": "alice"}))
    params = {"caller": "alice", "message_ids": [mid]}
    _same_shape(marked(params), real("message.markRead", params))
    _same_shape(SENT_PAGE, real("message.sent", {"caller": "bob"}))
    _same_shape(EDITED, real("message.edit", {"caller": "bob", "message_id": mid, "content": "hello again"}))
    _same_shape(DELETED, real("message.delete", {"caller": "bob", "message_id": mid}))


def test_groups(real):
    real("agent.register", {"name": "carol", "role": "implementer", "module": ""})
    _same_shape(DONE, real("group.create", {"caller": "carol", "name": "builders", "description": "x"}))
    _same_shape(
        DONE,
        real(
            "group.member.add", {"caller": "carol", "group": "builders", "member": "implementer", "member_type": "role"}
        ),
    )
    _same_shape(GROUPS, real("group.list", {}))
    _same_shape(MEMBERS, real("group.members", {"name": "builders"}))
    _same_shape(MEMBERS_EXPANDED, real("group.members", {"name": "builders", "expand": True}))
    _same_shape(
        DONE,
        real(
            "group.member.remove",
            {"caller": "carol", "group": "builders", "member": "implementer", "member_type": "role"},
        ),
    )
    _same_shape(DONE, real("group.delete", {"caller": "carol", "name": "builders"}))
