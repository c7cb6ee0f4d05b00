"""The daemon's own fold (its ring of keys with the local identities, its fact file and
verdict memory: `daemon.team.open_trust`) hands a rebuild's trust check to a second
process and takes back what it learned: the projection and the keys are those of a
rebuild judged in the daemon's process (issue 29)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from thrum import config as config_mod
from thrum import lifecycle
from thrum.daemon.team import open_trust
from thrum.paths import ThrumPaths
from thrum.store import database, projection
from thrum.store.log import EventLog
from thrum.trust.keys import LocalKeys
from thrum.trust.ring import KeyRing

from daemon_helpers import register


def _rebuilt(paths: ThrumPaths, worktree: Path, judge: str):
    """A rebuild of the daemon's log with the fold a daemon starting on ``paths`` makes."""
    event_log = EventLog(worktree)
    ring = KeyRing(paths.var / "known_keys.json", LocalKeys(paths.identities))
    _, fold = open_trust(paths, config_mod.load(paths.config), ring, event_log)
    db = database.open_database(paths.thrum_dir / f"{judge}.db")
    projection.rebuild(db, event_log, fold_fn=fold, judge=judge)
    return db, fold


def test_the_daemons_fold_judges_a_rebuild_apart_as_it_judges_one_itself(daemon, client, tmp_path, caplog):
    register(client, "alice", "implementer")
    register(client, "bob", "reviewer")
    for i in range(5):
        client.call("message.send", {"caller": "alice", "content": f"hello {i}", "to": ["bob"]})
    worktree = Path(client.call("daemon.status")["worktree"])
    client.close()
    lifecycle.stop(daemon)
    states = []
    for name in ("here", "apart"):  # two copies of the daemon's state, each rebuilt one way
        paths = ThrumPaths(daemon.repo, tmp_path / name)
        shutil.copytree(daemon.thrum_dir, paths.thrum_dir, ignore=shutil.ignore_patterns("*.sock", "*.db*"))
        (paths.var / "known_keys.json").unlink(missing_ok=True)  # learned again from the log
        (paths.var / "verified-lines").unlink(missing_ok=True)  # a first rebuild: every line verified
        states.append(paths)
    here_paths, apart_paths = states
    here, here_fold = _rebuilt(here_paths, worktree, "here")
    with caplog.at_level(logging.WARNING, logger="thrum.store.rebuild"):
        apart, apart_fold = _rebuilt(apart_paths, worktree, "apart")
    assert not [r for r in caplog.records if r.name == "thrum.store.rebuild"]  # judged apart, not again here
    here_var, apart_var = here_paths.var, apart_paths.var
    messages = "SELECT message_id, agent_id, body_content FROM messages ORDER BY message_id"
    assert apart.execute_sql(messages).fetchall() == here.execute_sql(messages).fetchall()
    assert projection.fold_counts(apart) == projection.fold_counts(here)
    assert apart_fold.verifier.ring.known() == here_fold.verifier.ring.known()
    assert (apart_var / "verified-lines").stat().st_size == (here_var / "verified-lines").stat().st_size > 0
    texts = {r[0] for r in apart.execute_sql("SELECT body_content FROM messages").fetchall()}
    assert texts == {f"hello {i}" for i in range(5)}
