"""The record of how the last sync went: ``.thrum/var/sync-state.json``.

Written by whichever process synced (the daemon's sync loop, or `offline.run_offline`
when the daemon is stopped), so ``sync status`` can say what happened either way.
No trio, no pygit2.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from .. import config as config_mod
from ..paths import ThrumPaths

__all__ = ["load_state", "now_iso", "record", "report_dict", "save_state", "sync_mode"]


def sync_mode(cfg: config_mod.Config, has_remote: bool) -> str:
    if cfg.local_only:
        return "local-only"
    return "remote" if has_remote else "no-remote"


def load_state(paths: ThrumPaths) -> dict[str, Any]:
    try:
        data = json.loads((paths.var / "sync-state.json").read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_state(paths: ThrumPaths, state: dict[str, Any]) -> None:
    target = paths.var / "sync-state.json"
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, target)


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def record(paths: ThrumPaths, report: dict[str, Any] | None, error: str | None) -> dict[str, Any]:
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
        chains = report.get("chains")
        if chains is not None:  # the daemon's chains report: what `sync status` shows while it is stopped
            report = {k: v for k, v in report.items() if k != "chains"}
            state["chains"] = {**chains, "at": at}
        state["last_report"] = report
        lost = report.get("rolled_back")
        if lost:  # kept (the last 20) until the user has seen them: `sync status`, doctor, the UI
            earlier = [r for r in state.get("rollbacks") or [] if r.get("text") != lost.get("text")]
            state["rollbacks"] = (earlier + [{**lost, "at": at}])[-20:]
    save_state(paths, state)
    return state


def report_dict(report: Any, mode: str) -> dict[str, Any]:
    """A cycle's `cycle.SyncReport` as the ``sync.run`` reply and the state file hold it."""
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
        "rolled_back": getattr(report, "rolled_back", None),
        "phases_ms": {k: round(v * 1000, 1) for k, v in (getattr(report, "phases", {}) or {}).items()},
    }
