"""Name conflicts as a replica reports them: one agent name registered with two keys.

Two machines that register the same name before either has synced each hold their
own key for it (issue 30, item 4). Every replica then refuses the lines of the key it
does not trust (`thrum.trust.ring`, rule 4), so messages are lost unless someone acts.
This module turns what the ring remembers into the report `sync`, `sync status`,
`doctor` and the UI show.

Rules:

1. A conflict is **open** while lines signed by a refused key keep arriving: the last
   one came less than `ACTIVE_S` (15 minutes) ago. Then `thrum sync` exits non-zero
   naming it and `thrum doctor` fails. A conflict whose other key has gone quiet is
   reported as information only (its lines stay refused; nothing new is being lost).
   So after the other machine gave the name up, this one stops failing once no line
   of the old key has come for 15 minutes; and an agent that goes on using the
   name fails the syncs again as soon as it writes.
2. The registration made first keeps the name (both machines see both registrations
   and agree): the machine whose registration is later gives it up (README, "One name
   on two machines"). A replica that holds neither key can only say who is involved.
3. A key this replica trusts is never reported as refused: once a machine has given
   the name up (its identity files moved away), it trusts the other key.

Pure: no I/O, times passed in.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["ACTIVE_S", "report", "summary"]

ACTIVE_S = 900.0  # a refused key is "still in use" while its lines arrived this recently
HOWTO = 'README, "One name on two machines"'


def _when(stamp: str) -> datetime | None:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
    except ValueError:
        return None


def report(
    conflicts: dict[str, dict[str, Any]], registered_here: dict[str, str], now: datetime | None = None
) -> list[dict[str, Any]]:
    """One item per conflicted name (``KeyRing.conflicts()`` in, sorted by name).

    ``registered_here``: when each local identity's own registration was made (to tell
    which registration came first).
    """
    now = now or datetime.now(timezone.utc)
    out = []
    for name in sorted(conflicts):
        entry = conflicts[name]
        keys = entry.get("keys") or {}
        if not keys:
            continue
        lines = sum(int(k.get("lines") or 0) for k in keys.values())
        last = max((k.get("last_received_at") or "" for k in keys.values()), default="")
        theirs = min((k.get("registered_at") or "" for k in keys.values() if k.get("registered_at")), default="")
        seen = _when(last)
        local = bool(entry.get("local"))
        ours = registered_here.get(name, "") if local else ""
        keeps = None
        if local and ours and theirs:
            keeps = "here" if ours <= theirs else "there"
        item = {
            "name": name,
            "local": local,
            "open": seen is not None and (now - seen).total_seconds() < ACTIVE_S,
            "lines_refused": lines,
            "last_received_at": last or None,
            "registered_here_at": ours or None,
            "registered_there_at": theirs or None,
            "keeps_name": keeps,
            "refused_keys": sorted(k[:12] + "…" for k in keys),
        }
        item["message"] = summary(item)
        out.append(item)
    return out


def summary(item: dict[str, Any]) -> str:
    """One line naming the conflict and what to do about it."""
    name = f"@{item['name']}"
    refused = f"{item['lines_refused']} of its line(s) from there were refused here"
    if item["local"]:
        if item["keeps_name"] == "there":
            return (
                f"name conflict: {name} is an agent of this machine, and another machine registered {name} "
                f"with another key; it was registered there first ({item['registered_there_at']}), so give the "
                f"name up here ({HOWTO}); {refused}, and this machine's {name} is refused there"
            )
        if item["keeps_name"] == "here":
            return (
                f"name conflict: {name} is an agent of this machine, and another machine registered {name} "
                f"with another key; it was registered here first ({item['registered_here_at']}), so that machine "
                f"must give the name up ({HOWTO}); {refused}"
            )
        return (
            f"name conflict: {name} is an agent of this machine, and another machine registered {name} with "
            f"another key; the one registered later must give the name up ({HOWTO}); {refused}"
        )
    return (
        f"name conflict: {name} is registered with two keys (the other at {item['registered_there_at'] or '?'}); "
        f"{item['lines_refused']} line(s) signed by the key this replica does not trust were refused; the machine "
        f"that registered {name} later must give the name up ({HOWTO})"
    )
