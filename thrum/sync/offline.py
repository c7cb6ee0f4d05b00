"""Sync without the daemon, and the record of how the last sync went.

`run_offline` is the one call a front end makes to sync when the daemon is
stopped (``thrum sync`` from cron): it runs a whole cycle in the caller's
process, holding the daemon's flock so no daemon starts (and appends)
meanwhile. Events it receives are folded by the next daemon when it starts
(catch-up). `status` is what ``thrum sync status`` shows meanwhile.

The outcome of the last cycle lives in ``.thrum/var/sync-state.json``, written
by whichever process synced (this cycle or the daemon's sync loop, which uses
`record`, `report_dict` and `sync_mode` from here too), so ``sync status``
can say what happened either way. No trio here.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from .. import config as config_mod
from .. import errors
from ..paths import ThrumPaths


# --------------------------------------------------------------------------- thrum doctor, daemon stopped


def doctor_checks(paths: ThrumPaths) -> list[dict]:
    """The checks ``thrum doctor`` makes without the daemon (git side; see ``diagnose``)."""
    from .diagnose import offline_checks

    return [c.to_dict() for c in offline_checks(paths)]


# --------------------------------------------------------------------------- the offline cycle


def _prefer_verified(paths: ThrumPaths):
    """The daemon's rule for a line rewritten in place, with the keys this replica trusts."""
    from ..trust.keys import LocalKeys
    from ..trust.resolve import prefer_verified
    from ..trust.ring import KeyRing

    return prefer_verified(KeyRing(paths.var / "known_keys.json", LocalKeys(paths.identities)))


def run_offline(paths: ThrumPaths) -> dict:
    """One full cycle without a daemon (cron with the daemon stopped).

    Received events are folded by the next daemon when it starts (catch-up).

    Raises:
        SyncFailed: the cycle failed (state file records why).
        Conflict: a daemon started meanwhile; use it instead.
    """
    from . import replicate
    from .worktree import ensure_sync_worktree

    cfg = config_mod.load(paths.config)
    fd = os.open(paths.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise errors.Conflict("the thrum daemon started meanwhile; run `thrum sync` again") from None
        worktree = ensure_sync_worktree(paths.main_repo)
        rep = replicate.Replicator(
            worktree, cfg.remote, replicate.credentials_from_env(cfg.values), prefer=_prefer_verified(paths)
        )
        local = threading.Lock()

        @contextmanager
        def locked() -> Iterator[None]:
            with local:
                yield

        mode = sync_mode(cfg, rep.has_remote())
        try:
            if mode == "remote":
                report = replicate.run_cycle(rep, locked)
            else:
                report = replicate.SyncReport()
                report.commits = int(rep.commit_pending())
                report.ignored = rep.ignored_paths()
        except errors.ThrumError as exc:
            record(paths, None, exc.message)
            raise
        finally:
            rep.index.flush()
        _tidy(rep, mode)
        result = report_dict(report, mode)
        record(paths, result, report.error)
        if report.error:
            raise errors.SyncFailed(report.error)
        return result
    finally:
        os.close(fd)


def _tidy(rep: Any, mode: str) -> None:
    """Keep the object stores compact (`hygiene`), as the daemon does after its syncs."""
    from . import hygiene, localremote

    stores = [rep.common_dir]
    remote = localremote.local_remote_path(rep.remote_url()) if mode == "remote" else None
    if remote is not None:
        stores.append(remote)
    for store in stores:
        hygiene.consolidate(store)


def status(paths: ThrumPaths) -> dict:
    """``sync status`` while the daemon is stopped: the configured mode and the last recorded outcome."""
    cfg = config_mod.load(paths.config)
    state = load_state(paths)
    return {
        "mode": "local-only" if cfg.local_only else "unknown (daemon stopped)",
        "remote": cfg.remote,
        "last_success": state.get("last_success"),
        "last_error": state.get("last_error"),
        "last_error_at": state.get("last_error_at"),
        "last_report": state.get("last_report"),
        "pending_events": None,
        "quarantined": None,
        "name_conflicts": _name_conflicts(paths),
        "daemon_running": False,
    }


def _name_conflicts(paths: ThrumPaths) -> list[dict]:
    """What the daemon's trust state remembers of names claimed by two keys (read-only)."""
    from .. import identity
    from ..trust.conflicts import report
    from ..trust.keys import LocalKeys
    from ..trust.ring import KeyRing

    found = KeyRing(paths.var / "known_keys.json", LocalKeys(paths.identities)).conflicts()
    here = {}
    for name, entry in found.items():
        if entry["local"]:
            try:
                here[name] = identity.load(paths.identities / f"{name}.json").created_at
            except Exception:  # noqa: BLE001 - an unreadable identity only loses "who was first"
                continue
    return report(found, here)


# --------------------------------------------------------------------------- the state file


def sync_mode(cfg: config_mod.Config, has_remote: bool) -> str:
    if cfg.local_only:
        return "local-only"
    return "remote" if has_remote else "no-remote"


def load_state(paths: ThrumPaths) -> dict:
    try:
        data = json.loads((paths.var / "sync-state.json").read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_state(paths: ThrumPaths, state: dict) -> None:
    target = paths.var / "sync-state.json"
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, target)


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def record(paths: ThrumPaths, report: dict | None, error: str | None) -> dict:
    """Merge one cycle's outcome into the state file; returns the new state."""
    state = load_state(paths)
    at = now_iso()
    state["last_attempt"] = at
    if error:
        state["last_error"] = error
        state["last_error_at"] = at
    else:
        state["last_success"] = at
        state["last_error"] = None
    if report is not None:
        state["last_report"] = report
    save_state(paths, state)
    return state


def report_dict(report: Any, mode: str) -> dict:
    """A cycle's `replicate.SyncReport` as the ``sync.run`` reply and the state file hold it."""
    return {
        "ok": report.error is None,
        "mode": mode,
        "remote": report.remote,
        "remote_url": report.remote_url,
        "sent": report.sent,
        "received": report.received,
        "commits": report.commits,
        "pushed": report.pushed,
        "attempts": report.attempts,
        "duration_ms": round(report.duration_s * 1000, 1),
        "error": report.error,
        "ignored_paths_by_reason": dict(getattr(report, "ignored", {}) or {}),
        "phases_ms": {k: round(v * 1000, 1) for k, v in (getattr(report, "phases", {}) or {}).items()},
    }
