"""The events package: every name callers use is there, and the cheap rules stay cheap."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

from thrum import events as ev


def test_every_exported_name_loads_and_none_is_shadowed_by_a_module():
    modules = {m.name for m in pkgutil.iter_modules(ev.__path__)}
    assert not modules & set(ev.__all__)
    for name in ev.__all__:
        assert getattr(ev, name) is not None
    assert ev.from_dict(ev.SessionStart(agent_id="alice").to_dict()).type == "agent.session.start"


def test_the_rules_the_cli_imports_at_start_up_pull_in_no_ulid_or_dataclasses():
    code = (
        "import sys, thrum.events.names, thrum.events.tags, thrum.events.values; "
        "print(sorted(m for m in ('ulid', 'dataclasses', 'thrum.events.typed') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_tag_text_and_objects_are_read_by_one_rule():
    assert ev.split_tag("module:auth:v2") == ("module", "auth:v2")
    assert ev.split_tag(" module : auth ", strip=True) == ("module", "auth")
    for bad in ("module", ":auth", "module:", " : "):
        assert ev.split_tag(bad, strip=True) is None
    assert ev.tag_fields({"type": "mention", "value": "bob"}) == ("mention", "bob")
    assert ev.tag_fields(("mention", "bob")) == ("mention", "bob")
    for bad in ({"type": "", "value": "x"}, {"type": "x"}, ["a"], "a:b", None):
        assert ev.tag_fields(bad) is None


def test_shard_rule_agrees_with_the_shard_an_event_is_written_to():
    create = ev.MessageCreate(agent_id="alice", session_id="ses_1", body=ev.Body("hi")).to_dict()
    assert ev.ShardRule(ev.stream_for(create)).allows(create)
    assert ev.ShardRule(ev.segment_path(ev.stream_for(create), 7)).allows(create)
    assert not ev.ShardRule("messages/bob/000001.jsonl").allows(create)
    assert not ev.ShardRule("messages/../alice/000001.jsonl").allows(create)
    register = ev.AgentRegister(agent_id="alice", role="dev").to_dict()
    assert ev.ShardRule("events/000001.jsonl").allows(register)
    assert not ev.ShardRule("events/x.jsonl").allows(register)
    assert not ev.ShardRule("events.jsonl").allows(register)  # the old single-file layout is no path of ours
