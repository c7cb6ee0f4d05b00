"""Sync without the daemon: the offline cycle, ``sync status`` and ``doctor`` meanwhile.

`run_offline` is the one call a front end makes to sync when the daemon is
stopped (``thrum sync`` from cron): it runs a whole cycle in the caller's
process, holding the daemon's flock so no daemon starts (and appends)
meanwhile. Events it receives are folded by the next daemon when it starts
(catch-up). A full repack of a store that falls due after the cycle is left to a child
started once the locks are released (`fullrepack`). `status` is what ``thrum sync
status`` shows meanwhile.

The outcome of each cycle is recorded (`state`) whatever happens, so ``sync status``
says what the last one did. No trio here.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import config as config_mod
from .. import errors
from ..paths import ThrumPaths
from . import state

if TYPE_CHECKING:  # imported where used: a front end's start-up imports this module
    from .logaccess import PlainLog
    from .merge.shard import Prefer


# --------------------------------------------------------------------------- thrum doctor, daemon stopped


def doctor_checks(paths: ThrumPaths) -> list[dict[str, Any]]:
    """The checks ``thrum doctor`` makes without the daemon (git side; see ``diagnose``)."""
    from .diagnose import offline_checks

    return [c.to_dict() for c in offline_checks(paths)]


# --------------------------------------------------------------------------- the offline cycle


def _prefer_verified(paths: ThrumPaths) -> Prefer:
    """The daemon's rule for a line rewritten in place, with the keys this replica trusts."""
    from ..trust.keys import LocalKeys
    from ..trust.resolve import prefer_verified
    from ..trust.ring import KeyRing

    return prefer_verified(KeyRing(paths.var / "known_keys.json", LocalKeys(paths.identities)))


OFFLINE_LOCK = "offline-sync.lock"


def run_offline(paths: ThrumPaths) -> dict[str, Any]:
    """One full cycle without a daemon (cron with the daemon stopped).

    Received events are folded by the next daemon when it starts (catch-up). The
    outcome is recorded whatever happens, an unexpected failure included.

    Raises:
        SyncFailed: the cycle failed (state file records why).
        Conflict: a daemon started meanwhile; use it instead.
    """
    result = run_unless_daemon(paths)
    if result is None:
        raise errors.Conflict("the thrum daemon started meanwhile; run `thrum sync` again")
    return result


def offline_sync_running(paths: ThrumPaths) -> bool:
    """Whether an offline `thrum sync` has the turn (it then holds the daemon's flock too)."""
    try:
        fd = os.open(paths.var / OFFLINE_LOCK, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def run_unless_daemon(
    paths: ThrumPaths, *, starting: Callable[[], None] | None = None, waiting: Callable[[], None] | None = None
) -> dict[str, Any] | None:
    """One full cycle without a daemon, or None when a daemon runs (ask it instead).

    Offline syncs take turns (cron and a person at once, issue 30 item 7): each holds
    `OFFLINE_LOCK` for its whole cycle, then the daemon's flock (so no daemon starts
    meanwhile). Whoever holds the daemon's flock while we hold the turn is therefore a
    daemon. ``waiting`` is called when another offline sync has the turn, ``starting``
    when the cycle starts here.
    """
    paths.var.mkdir(parents=True, exist_ok=True)
    later = _Later()
    turn = os.open(paths.var / OFFLINE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(turn, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(turn, fcntl.LOCK_EX)
        return _run_holding_turn(paths, starting, later)
    finally:
        os.close(turn)
        later.start(paths)  # both locks released: the next sync or a daemon need not wait for it


def _run_holding_turn(paths: ThrumPaths, starting: Callable[[], None] | None, later: _Later) -> dict[str, Any] | None:
    cfg = config_mod.load(paths.config)
    fd = os.open(paths.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # a daemon runs: `thrum sync` asks it, and needs none of the sync's modules
        # Imported once we know the cycle runs here: they cost a `thrum sync` ~0.13 s of CPU.
        from .cycle import run_cycle
        from .logaccess import PlainLog
        from .replicate import Replicator
        from .transport.credentials import credentials_from_env
        from .worktree import ensure_sync_worktree

        if starting is not None:
            starting()
        try:
            worktree = ensure_sync_worktree(paths.main_repo)
            rep = Replicator(
                worktree,
                cfg.remote,
                credentials_from_env(cfg.values),
                prefer=_prefer_verified(paths),
                max_intake_bytes=int(cfg.max_sync_intake_bytes),
            )
            mode = state.sync_mode(cfg, rep.has_remote())
            files = _MergedInto(PlainLog(worktree))
            try:
                report = run_cycle(rep, files, remote=mode == "remote")
            finally:
                rep.index.flush()
                if files.merged_into:
                    _reread_later(paths, files.merged_into)
        except errors.ThrumError as exc:
            state.record(paths, None, exc.message)
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, then one line for the caller
            message = f"the sync failed unexpectedly: {type(exc).__name__}: {exc}"
            state.record(paths, None, message)
            raise errors.SyncFailed(message) from exc
        result = state.report_dict(report, mode)
        state.record(paths, result, report.error)
        later.stores = _tidy(rep, mode, detach=bool(cfg.tidy_detach))
        later.own = rep.common_dir
        if report.error:
            raise errors.SyncFailed(report.error)
        return result
    finally:
        os.close(fd)


class _MergedInto:
    """The offline cycle's files (a `logaccess.PlainLog`), noting which files a merge
    brought lines into."""

    def __init__(self, files: PlainLog) -> None:
        self._files = files
        self.merged_into: set[str] = set()
        self.locked = files.locked
        self.appended = files.appended
        self.not_committed = files.not_committed
        self.nothing_appended = files.nothing_appended
        self.read = files.read

    def apply_remote(self, writes: list[tuple[str, bytes]], received: dict[str, list[bytes]]) -> list[os.stat_result]:
        self.merged_into.update(received)
        return self._files.apply_remote(writes, received)


REREAD_FILE = "reread-shards.json"


def _reread_later(paths: ThrumPaths, shards: set[str]) -> None:
    """Files an offline cycle merged lines into, for the next daemon to read from their start:
    a merge may replace a line in place (a verified copy over a forged one), before the
    daemon's stored read position, where its catch-up would not look (docs/design/trust.md)."""
    path = paths.var / REREAD_FILE
    shards = shards | set(take_reread(paths, remove=False))
    tmp = path.with_name(f".{REREAD_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(sorted(shards)))
    os.replace(tmp, path)


def take_reread(paths: ThrumPaths, *, remove: bool = True) -> list[str]:
    """The files an offline sync asked the daemon to read again from their start (forgotten once taken)."""
    path = paths.var / REREAD_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if remove:
        path.unlink(missing_ok=True)
    return [x for x in data if isinstance(x, str)] if isinstance(data, list) else []


def _private(common_dir: Path) -> Path:
    """The private git dir `maintenance` repacks a path remote from (rule 3)."""
    return common_dir / "thrum-sync" / "repack.git"


class _Later:
    """The full repacks an offline cycle leaves to a child (`fullrepack`), started once its
    locks are released: the stores' ``objects`` directories, and our repository's common dir."""

    def __init__(self) -> None:
        self.stores: list[Path] = []
        self.own = Path()

    def start(self, paths: ThrumPaths) -> None:
        if self.stores:
            from .fullrepack import detach

            detach(self.own, _private(self.own), self.stores, paths.log_file)


def _tidy(rep: Any, mode: str, *, detach: bool) -> list[Path]:
    """Keep the object stores compact (`maintenance`), as the daemon does after its syncs:
    the roll-ups here (a tenth of a second), a full repack (minutes on a large store) left
    to a child unless ``detach`` is off (`fullrepack`); the stores left to it."""
    from . import SyncError, maintenance

    tidier = maintenance.Tidier(rep.common_dir, _private(rep.common_dir))
    remote = rep.path_remote() if mode == "remote" else None
    try:
        repacks = tidier.due_repacks(
            remote, where=f"remote {rep.remote_name} ({remote})", trusted=rep.credentials.trusted_paths
        )
    except SyncError:
        return []  # the sync said why
    except Exception:  # noqa: BLE001 - a failed tidy-up never fails the sync
        logging.getLogger(__name__).exception("could not prepare the consolidation of %s", rep.common_dir)
        return []
    later = []
    for repack in repacks:
        if repack.full and detach:
            later.append(repack.objects)
        else:
            tidier.run(repack)
    return later


def status(paths: ThrumPaths) -> dict[str, Any]:
    """``sync status`` while the daemon is stopped: the configured mode and the last recorded outcome."""
    cfg = config_mod.load(paths.config)
    last = state.load_state(paths)
    return {
        "mode": "local-only" if cfg.local_only else "unknown (daemon stopped)",
        "remote": cfg.remote,
        "last_success": last.get("last_success"),
        "last_error": last.get("last_error"),
        "last_error_at": last.get("last_error_at"),
        "last_report": last.get("last_report"),
        "pending_events": _pending(paths, cfg),
        "quarantined": None,
        "chains": _chains(last),
        "name_conflicts": _name_conflicts(paths),
        "daemon_running": False,
        "team": _team_summary(paths, cfg.remote),
    }


def _chains(last: dict[str, Any]) -> dict[str, Any]:
    """Every writer's chain as the daemon reported it after its last sync (``at``; the
    projection is the daemon's to read), and the rollbacks any sync recorded since, this
    one's included: the daemon's ``sync.chains``, as of then."""
    kept = last.get("chains")
    out: dict[str, Any] = dict(kept) if isinstance(kept, dict) else {"gaps": [], "faults": [], "at": None}
    out["rollbacks"] = last.get("rollbacks") or []
    return out


def _pending(paths: ThrumPaths, cfg: config_mod.Config) -> int | None:
    """Events the remote's tip lacks, counted from the log (None: no remote, or no sync worktree yet)."""
    from .logaccess import PlainLog
    from .remoteview import RemoteView
    from .worktree import sync_worktree_path

    worktree = sync_worktree_path(paths.main_repo)
    if cfg.local_only or not worktree.is_dir():
        return None
    try:
        view = RemoteView(worktree, cfg.remote)
        if cfg.remote not in view.store.remote_names():
            return None
        return view.pending(PlainLog(worktree))
    except Exception:  # noqa: BLE001 - a status never fails for a count
        logging.getLogger(__name__).exception("could not count the events the remote lacks")
        return None


def _name_conflicts(paths: ThrumPaths) -> list[dict[str, Any]]:
    """What the daemon's trust state remembers of names claimed by two keys (read-only)."""
    from .. import identity
    from ..trust.conflicts import report
    from ..trust.keys import LocalKeys
    from ..trust.ring import KeyRing

    found = KeyRing(paths.var / "known_keys.json", LocalKeys(paths.identities)).conflicts()
    here: dict[str, str] = {}
    for name, entry in found.items():
        if entry["local"]:
            try:
                here[name] = str(getattr(identity.load(paths.identities / f"{name}.json"), "created_at", ""))
            except Exception:  # noqa: BLE001 - an unreadable identity only loses "who was first"
                continue
    return report(found, here)


def _team_summary(paths: ThrumPaths, remote: str) -> dict[str, Any]:
    from .teamfile import team_summary

    return team_summary(paths.main_repo, remote)


# --------------------------------------------------------------------------- the team root (thrum team)


def team_root(paths: ThrumPaths) -> dict[str, Any]:
    """The team root as this replica sees it: the file committed on the normal branch
    (`teamfile`), where it comes from, and whether the checkout's copy differs
    (an uncommitted or side-branch edit, which does not count)."""
    from .teamfile import read_committed_root, worktree_copy_differs

    cfg = config_mod.load(paths.config)
    committed = read_committed_root(paths.main_repo, cfg.remote)
    out = committed.to_json()
    out["checkout_differs"] = worktree_copy_differs(paths.repo, committed)
    return out
