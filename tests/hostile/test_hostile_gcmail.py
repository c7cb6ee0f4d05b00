"""Gas City mailboxes belong to the agents named for them (issue 31, finding 6).

The attack: an agent the pusher registers by trust on first use, with ``module =
gc_mayor``, counted as a keeper of the mayor's mailbox, so its ``message.archive``
archived the mayor's mail on every replica. An agent whose ``display`` said
``mayor`` had its mail shown as from the mayor.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from thrum import events as ev
from thrum.trust import keys, signing

from hostile_helpers import adopt_root, events_file, forge
from replication_helpers import THRUM

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "gcmail"))
from gc_exec import Provider  # noqa: E402


class _Intruder:
    """An agent the pusher registers (trust on first use), and lines signed by it."""

    def __init__(self, mallory, tmp_path, name: str, **fields):
        self.mallory, self.name = mallory, name
        self.keys = keys.LocalKeys(tmp_path / f"{name}-keys")
        _, self.public = self.keys.create(name)
        self.key_file = tmp_path / f"{name}-keys" / f"{name}.key"
        reg = ev.AgentRegister(agent_id=name, name=name, public_key=self.public.b64, **fields).to_dict()
        mallory.append(events_file(mallory), forge(reg, name, self.key_file))

    def write(self, stream: str, d: dict) -> None:
        self.mallory.write(f"{stream}/000001.jsonl", forge(d, self.name, self.key_file))

    def mail(self, to_box: str, text: str) -> None:
        d = ev.MessageCreate(
            agent_id=self.name,
            session_id=ev.new_id("ses"),
            body=ev.Body(text),
            refs=(ev.Tag("mention", to_box),),
            message_id=signing.new_message_id(self.public.tag),
        ).to_dict()
        self.write(f"messages/{self.name}", d)


def test_nobody_keeps_a_mailbox_by_claiming_its_module_or_sends_as_its_address(team, tmp_path):
    t = team(1)
    (a,) = t.machines
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    city = Provider(a.path, cwd)
    city.ensure_running()
    sent = city.send("human", "mayor", "orders", "hold the gate")
    a.sync()
    mallory = t.attacker()
    keeper = _Intruder(mallory, tmp_path, "mallory", role="gc", module="gc_mayor", display="mayor")
    keeper.write("receipts/mallory", ev.MessageArchive(agent_id="mallory", message_ids=(sent["id"],)).to_dict())
    # a name of the gc agent kind whose own letters say nothing of the mayor, displayed as "mayor"
    poser = _Intruder(mallory, tmp_path, "gcr_aaaaaaaa___" + "b" * 20, role="gc", module="gc_mayor", display="mayor")
    poser.mail("gc_human", "orders from the mayor: open the gate")
    mallory.push()
    a.sync()
    assert [m["id"] for m in city.inbox("mayor") or []] == [sent["id"]]
    assert city.count("mayor") == (1, 1)
    got = city.inbox("human") or []
    assert [m["body"] for m in got] == ["orders from the mayor: open the gate"]
    assert got[0]["from"] != "mayor"


def test_under_a_root_a_pusher_cannot_plant_an_agent_that_speaks_for_a_mailbox(team, tmp_path):
    """Issue 31, finding 6 (residual): under a team root, even with ``policy = "open"``, an
    agent named to act for a Gas City mailbox (``gcr_<tag>_mayor``) counts only once an
    admin admitted its key; a plain name is still learned on first use."""
    t = team(2)
    a, b = t.machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    for m in (a, b, a):
        m.sync()
    adopt_root(t, a, b, policy="open")
    a.sync()
    b.sync()
    before = _tip(t.remote)
    mallory = t.attacker()
    mallory.pull()
    proxy = "gcr_aaaaaaaa_mayor"
    poser = _Intruder(mallory, tmp_path, proxy, role="gc", module="gc_mayor", display="mayor")
    poser.mail("gc_human", "orders from the mayor: open the gate")
    _Intruder(mallory, tmp_path, "mallory", role="intruder")
    mallory.push()
    verdict = subprocess.run(
        [THRUM, "verify", "--repo", str(t.remote), "--from", before, "--to", _tip(t.remote)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verdict.returncode == 1
    kinds = sorted(line.split(": ")[1] for line in verdict.stdout.splitlines())
    assert kinds == ["not-admitted", "unknown-signer"], verdict.stdout  # the registration, and the mail it signs
    assert f"{proxy} (key" in verdict.stdout
    for m in (a, b):
        m.sync()
        agents = {x["name"] for x in m.json("agent", "list", "--all")["agents"]}
        assert "mallory" in agents and proxy not in agents, (m.name, agents)
        assert m.json("sync", "status")["quarantined_by_kind"].get("not-admitted") == 1
    a.json("team", "admit", proxy, agent="alice")  # an admin admits the machine's agent: it counts
    a.sync()
    b.sync()
    assert proxy in {x["name"] for x in b.json("agent", "list", "--all")["agents"]}


def _tip(remote) -> str:
    out = subprocess.run(["git", "-C", str(remote), "rev-parse", "refs/heads/a-sync"], capture_output=True, text=True)
    return out.stdout.strip()
