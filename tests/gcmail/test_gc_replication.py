"""Gas City mail between two machines: clones of one bare remote, each with its own
daemon, each city running `thrum-gc-mail` as gc does; `thrum sync` carries the mail,
and the read and archive state, both ways. The state also survives a rebuild."""

from __future__ import annotations

import pytest

from fixtures.repos.builders import make_replicas
from fixtures.thrum_cli import run_thrum
from gc_exec import Provider
from thrum import lifecycle
from thrum.paths import resolve


def sync(p: Provider) -> None:
    """`thrum sync` in the city (in the test's process: the provider's calls are the processes here)."""
    proc = run_thrum(["sync", "--json"], cwd=p.repo, env=p.env)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def cities(tmp_path):
    replicas = make_replicas(tmp_path / "set", 2)
    made = []
    for clone in replicas.clones:
        cwd = tmp_path / f"{clone.name}-elsewhere"
        cwd.mkdir()
        p = Provider(clone, cwd)
        p.ensure_running()  # sets up thrum in the clone and starts its daemon
        made.append(p)
    yield made
    for p in made:
        lifecycle.stop(resolve(p.repo))


def test_mail_and_its_state_cross_machines_and_survive_a_rebuild(cities):
    a, b = cities
    m1 = a.send("Mayor Of Town", "myrig/witness", "Patrol", "check the gate")
    m2 = a.send("human", "myrig/witness", "FYI", "no action needed")
    sync(a)
    sync(b)

    on_b = b.inbox("myrig/witness")
    assert [(m["id"], m["from"], m["to"], m["subject"], m["body"]) for m in on_b] == [
        (m1["id"], "Mayor Of Town", "myrig/witness", "Patrol", "check the gate"),
        (m2["id"], "human", "myrig/witness", "FYI", "no action needed"),
    ]
    b.read(m1["id"])
    b.archive(m2["id"])
    r = b.reply(m1["id"], "myrig/witness", "RE: Patrol", "gate checked")
    sync(b)
    sync(a)

    assert a.inbox("myrig/witness") is None
    assert [(m["id"], m["read"]) for m in a.all("myrig/witness")] == [(m1["id"], True)]
    assert a.count("myrig/witness") == (1, 0)
    (reply,) = a.inbox("Mayor Of Town")
    assert (reply["id"], reply["from"], reply["thread_id"], reply["reply_to"]) == (
        r["id"],
        "myrig/witness",
        m1["thread_id"],
        m1["id"],
    )
    with pytest.raises(Exception) as info:
        a.archive(m2["id"])
    assert "already archived" in str(info.value)

    a.mark_unread(m1["id"])  # the same mailbox acts on both machines, through each machine's own agent
    a.send("myrig/witness", "Mayor Of Town", "", "also from A")
    sync(a)
    sync(b)
    assert [m["id"] for m in b.inbox("myrig/witness")] == [m1["id"]]
    assert [(m["from"], m["body"]) for m in b.all("Mayor Of Town")] == [
        ("myrig/witness", "gate checked"),
        ("myrig/witness", "also from A"),
    ]

    paths = resolve(a.repo)  # rebuild A's projection from the log: the same mailboxes
    lifecycle.stop(paths)
    paths.database.unlink()
    assert [(m["id"], m["read"]) for m in a.all("myrig/witness")] == [(m1["id"], False)]
    assert a.count("myrig/witness") == (1, 1)
    assert [m["id"] for m in a.thread(m1["id"])] == [m1["id"], r["id"]]
    assert a.get(m1["id"])["subject"] == "Patrol"
