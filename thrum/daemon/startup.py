"""Start-up: the store opened before the daemon serves (a worker thread, after the flock).

Order: make sure the ``a-sync`` worktree exists (recovering its files), open the log,
load the key ring, read the committed team root once (`TeamState`: the roster, the
log binding and the verifier are made from that one read), open (or rebuild) the
projection and catch it up with the log, judge the log again when the root changed
while no daemon ran, fold again what an offline sync merged into, check that the
projection covers the log (`store.coverage`: skipped when this start rebuilt it from the
whole log, which covers it by construction), then let the catch-up's peak memory go.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Config
from ..paths import ThrumPaths
from ..store.log import EventLog
from ..store.projection import Progress, open_outdated, open_projection
from ..store.verified import VerifiedFold
from ..trust.keys import LocalKeys
from ..trust.ring import KeyRing
from .limits import give_back_memory
from .signer import Signer
from .team import TeamState, open_trust
from .writer import Writer


@dataclass(frozen=True)
class Store:
    """What start-up opened: the parts the rest of the daemon is made from."""

    worktree: Path  # the a-sync worktree the log lives in
    ring: KeyRing  # keys this replica trusts
    team: TeamState  # the committed root in effect and its roster
    fold: VerifiedFold  # judges every line before it is folded
    signer: Signer  # signs every event written here
    writer: Writer  # the single writer
    upgrading: bool = False  # an older schema's projection is served; its successor is to be built (issue 29)
    rebuilt: bool = False  # the projection was built from the whole log at this start
    repaired: tuple[str, ...] | None = None  # log files the coverage check folded again; None: not checked


def open_store(paths: ThrumPaths, config: Config, keys: LocalKeys, progress: Progress | None = None) -> Store:
    """Open everything the daemon serves from (blocking: run it in a worker thread).

    ``progress``: told how far a start-up rebuild is (`projection.Progress`)."""
    from ..sync import offline as sync_record
    from ..sync.transport.callbacks import remote_callbacks
    from ..sync.transport.credentials import credentials_from_env
    from ..sync.worktree import ensure_sync_worktree

    callbacks = None if config.local_only else remote_callbacks(credentials_from_env(config.values))
    worktree = ensure_sync_worktree(paths.main_repo, config.remote, callbacks=callbacks)
    event_log = EventLog(worktree)
    ring = KeyRing(paths.var / "known_keys.json", keys)
    team, fold = open_trust(paths, config, ring, event_log)
    # A projection of another schema version is served while the new one is built beside
    # it and swapped in (`Daemon._upgrade`); without one to serve (none, or unreadable), build first.
    db = open_outdated(paths.database)
    upgrading, rebuilt = db is not None, False
    if db is None:
        db, rebuilt = open_projection(paths.database, event_log, fold, progress=progress)
    if team.judged_blob() != team.blob:  # a root adopted, changed or removed while stopped
        fold.ask_rejudge("the team root changed")
    signer = Signer(keys, team.binding.get, team.roster)  # refuses a key the roster knows is retired
    writer = Writer(db, event_log, signer, fold, db_path=paths.database)
    reread = sync_record.take_reread(paths)  # what an offline sync merged into
    repaired = None
    if upgrading:  # (its rebuild reads the whole log)
        writer.view.rebuild_ahead()
    elif not rebuilt:  # a projection just folded from the whole log covers it (and every reread file)
        repaired = writer.ensure_covered(reread)
    fold.release()
    give_back_memory()  # the catch-up's peak (a large history, the verdict memory) goes back
    writer.when_rejudged(team.mark_judged)
    return Store(
        worktree=worktree,
        ring=ring,
        team=team,
        fold=fold,
        signer=signer,
        writer=writer,
        upgrading=upgrading,
        rebuilt=rebuilt,
        repaired=repaired,
    )
