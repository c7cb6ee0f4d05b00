"""One reader of the committed team root (issue 28, item 2): a starting daemon reads
``thrum-team.toml`` once, and the log binding, the roster and the verifier are made
from that one read (`thrum.daemon.team.TeamState`)."""

from __future__ import annotations

import sys

import pytest
import trio

import thrum.daemon.server  # noqa: F401  (every module that may read the root is loaded)
import thrum.sync.verifyrange  # noqa: F401
from fixtures.inprocess import running_daemon
from thrum.sync import teamfile


async def test_a_starting_daemon_reads_the_committed_team_root_once(tmp_path, monkeypatch: pytest.MonkeyPatch):
    reads: list[object] = []
    read = teamfile.read_committed_root

    def counted(*args: object, **kwargs: object) -> object:
        reads.append(args)
        return read(*args, **kwargs)

    for name, module in list(sys.modules.items()):  # wherever the reader was imported to
        if name.startswith("thrum") and getattr(module, "read_committed_root", None) is read:
            monkeypatch.setattr(module, "read_committed_root", counted)
    async with trio.open_nursery() as nursery:
        daemon = await running_daemon(tmp_path, nursery, agents=())
        assert len(reads) == 1  # not once for the log binding and once more for the roster
        assert daemon.services is not None and daemon.services.team.status()["trust"] == "tofu"
        daemon.request_shutdown()
