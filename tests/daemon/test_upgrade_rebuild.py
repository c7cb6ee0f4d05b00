"""A daemon that finds a projection of another schema version serves it while it builds the new one
beside it, then swaps it in: an upgrade costs no downtime for reads (issue 29)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from thrum import events as ev
from thrum import lifecycle
from thrum.store.database import SCHEMA_VERSION
from thrum.trust.keys import LocalKeys
from thrum.trust.signing import new_message_id, sign

from daemon_helpers import RawClient, register

HISTORY = 6_000  # lines the old projection never folded: the new one takes a while to build


def _append_history(paths, n: int) -> None:
    """Lines of alice's, signed with her key, written into her log while the daemon is stopped
    (as a sync that merged while it was down would leave them)."""
    private, public = LocalKeys(paths.identities).get("alice")
    segment = sorted(Path(paths.main_repo).rglob("messages/alice/*.jsonl"))[-1]
    lines = []
    for i in range(n):
        d = ev.MessageCreate(
            message_id=new_message_id(public.tag),
            agent_id="alice",
            session_id="ses_history",
            body=ev.Body(f"history {i}"),
        ).to_dict()
        lines.append(ev.encode_line(sign(d, "alice", private)))
    with open(segment, "ab") as f:
        f.write(b"".join(lines))


def _outdate(paths) -> None:
    """Give the projection an older schema version, as a daemon of this build finds it after an upgrade."""
    with sqlite3.connect(paths.database) as conn:
        conn.execute("UPDATE schema_version SET version = version - 1")


def test_an_upgrade_serves_reads_from_the_old_projection_until_the_new_one_is_swapped_in(daemon, client):
    register(client, "alice", "implementer")
    for i in range(3):
        client.call("message.send", {"caller": "alice", "content": f"before the upgrade {i}"})
    client.close()
    lifecycle.stop(daemon)
    _append_history(daemon, HISTORY)
    _outdate(daemon)

    lifecycle.start(daemon)  # returns once it listens: before the new projection is built
    c = RawClient(daemon)
    try:
        answered_while_rebuilding = 0
        deadline = time.monotonic() + 120
        first = c.call("daemon.status")["view"]
        assert first["rebuilding"] or first["rebuilds"] >= 1, "it rebuilt before it listened"
        while True:
            listing = c.call("message.list", {"caller": "alice", "page_size": 5})
            if c.call("daemon.status")["view"]["rebuilds"] >= 1:
                break
            assert listing["total"] == 3  # not swapped in yet when it was read: the old projection answered
            answered_while_rebuilding += 1
            assert time.monotonic() < deadline, "the new projection never came"
        assert answered_while_rebuilding > 0
        assert c.call("message.list", {"caller": "alice", "page_size": 5})["total"] == 3 + HISTORY
        sent = c.call("message.send", {"caller": "alice", "content": "after the upgrade"})
        got = c.call("message.get", {"caller": "alice", "message_id": sent["message_id"]})
        assert got["message"]["body"]["content"] == "after the upgrade"
    finally:
        c.close()
    with sqlite3.connect(daemon.database) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
