"""The daemon's status as `thrum daemon status` prints it, and the sync's as `thrum sync
status` does: one labelled line per fact.

Pure (no I/O): ``now`` is passed in (for the age of the last sync). A daemon that
is behind its log says so, with what the user can expect meanwhile.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .text import clean, duration, relative_time


def render_daemon_status(st: dict[str, Any], *, now: datetime | None = None) -> str:
    if not st.get("running"):
        lines = ["Daemon:  not running"]
    else:
        extra = []
        if st.get("pid"):
            extra.append(f"pid {st['pid']}")
        if st.get("uptime") is not None:
            extra.append(f"up {duration(st['uptime'])}")
        lines = ["Daemon:  running" + (f" ({', '.join(extra)})" if extra else "")]
    for label, key in (
        ("Socket:", "socket"),
        ("Repo:", "repo"),
        ("Version:", "version"),
        ("WS port:", "ws_port"),
        ("Log:", "log"),
    ):
        if st.get(key) not in (None, ""):
            lines.append(f"{label:<9}{st[key]}")
    sync = st.get("sync")
    if isinstance(sync, dict) and sync:
        mode = sync.get("mode") or ("local" if not sync.get("remote") else "remote")
        text = f"{mode}"
        if sync.get("remote"):
            text += f" ({sync['remote']})"
        if sync.get("last_success"):
            text += f", last success {relative_time(sync['last_success'], now)}"
        if sync.get("last_error"):
            text += f", last error: {clean(sync['last_error'])}"
        lines.append(f"{'Sync:':<9}{text}")
    view = st.get("view")
    if isinstance(view, dict) and view.get("state") == "behind":
        lines.append(
            f"{'View:':<9}behind the log ({clean(str(view.get('error') or '?'))}); "
            "writes are stored, queries show them once it catches up"
        )
    return "\n".join(lines)


def render_sync_status(s: dict[str, Any]) -> str:
    lines = [f"Mode:          {s['mode']}"]
    if s.get("remote"):
        url = f" ({s['remote_url']})" if s.get("remote_url") else ""
        lines.append(f"Remote:        {s['remote']}{url}")
    if s.get("credential_source"):
        lines.append(f"Login:         {s['credential_source']}")
    if s.get("syncing_since"):
        waiting = s.get("waiting_for_remote_since")
        lines.append(
            f"Syncing:       since {s['syncing_since']}"
            + (f" (waiting for the remote to answer since {waiting})" if waiting else "")
        )
    lines.append(f"Last success:  {s.get('last_success') or 'never'}")
    if s.get("last_error"):
        lines.append(f"Last error:    {s['last_error']} (at {s.get('last_error_at')})")
    if s.get("pending_events") is not None:
        lines.append(f"Pending:       {s['pending_events']} local event(s) not yet pushed")
    if s.get("team"):
        lines += _trust_lines(s["team"])
    if s.get("quarantined") is not None:
        lines.append(f"Quarantined:   {s['quarantined']} line(s)/event(s) refused from the log")
    return "\n".join(lines + _log_lines(s))


def _trust_lines(team: dict[str, Any]) -> list[str]:
    """The trust in effect (the team root, or trust on first use), then the keys retired."""
    if team.get("trust") == "team-root":
        lines = [f"Trust:         team root ({team.get('policy')} policy; {team.get('source')})"]
    else:
        why = f"; {team['error']}" if team.get("error") else ""
        lines = [f"Trust:         trust on first use (no team root: thrum team init{why})"]
    for item in team.get("retired") or []:
        lines.append(f"Retired key:   {item['name']} {item['key'][:12]}… {item['why']}")
    return lines


def _log_lines(s: dict[str, Any]) -> list[str]:
    """What the log holds that the user should know of: chain gaps and faults, name
    conflicts, paths in a-sync that are not thrum's."""
    lines = []
    chains = s.get("chains") or {}
    as_of = f" (as of the daemon's last sync, {chains['at']})" if chains.get("at") else ""
    for item in [*(chains.get("gaps") or []), *(chains.get("faults") or [])]:
        lines.append(f"Chains:        {item['text']}{as_of}")
    for item in chains.get("rollbacks") or []:
        lines.append(f"Chains:        {item['text']}")
    for c in s.get("name_conflicts") or []:
        state = "in use" if c.get("open") else "quiet for 15 minutes or more"
        lines.append(f"Conflicts:     @{c['name']} has a second key ({state}): {c['message']}")
    ignored = s.get("ignored_paths_by_reason")
    if ignored is None:
        ignored = (s.get("last_report") or {}).get("ignored_paths_by_reason")
    if ignored:
        detail = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(ignored.items()))
        lines.append(
            f"Ignored:       {sum(ignored.values())} path(s) in a-sync that are not thrum's ({detail}); "
            f"never checked out"
        )
    return lines
