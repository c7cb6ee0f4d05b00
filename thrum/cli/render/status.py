"""The daemon's status as `thrum daemon status` prints it: one labelled line per fact.

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
