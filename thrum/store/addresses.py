"""What an address (``--to``, ``--mention``, a group member) names: an agent, a role, a group,
``everyone``, or a role nobody holds yet; and, when it names nothing, what it may be a slip for.

Rules (decisions.md, "A team on three machines"):

1. ``@name`` resolves agent → role → group; ``everyone`` is built in. A name that means
   two of them at once (an agent named like a role other agents hold or like a group, a
   role named like a group) is *ambiguous* and refused as a recipient, whichever came
   first (`ambiguity`): the local RPC never lets one name shadow another, so only lines
   from the log (a pusher's registration, a group made on another machine in a race)
   get there, and any order of preference would let such a line take mail meant for the
   other (issue 31, finding 7). Mentions are matched by value and reach both.
2. An address that names nothing known may be a role nobody holds yet: accepted
   (``pending``) unless it is a keyboard slip away from a known address
   (`looks_like_typo`), a deleted agent's name, reserved, or not a name at all.
"""

from __future__ import annotations

import difflib
from typing import Any

import peewee as pw

from ..errors import Conflict, UnknownRecipient
from ..events.names import NAME_RE, RESERVED_NAMES
from .directory import EVERYONE, LIVE_AGENT, LIVE_GROUP, bare_name, group_row, live_agents
from .sql import all_rows, one_row


def _roles(db: pw.SqliteDatabase) -> list[str]:
    return [r[0] for r in all_rows(db, f"SELECT DISTINCT a.role FROM agents a WHERE {LIVE_AGENT} ORDER BY a.role")]


def _group_names(db: pw.SqliteDatabase) -> list[str]:
    return [r[0] for r in all_rows(db, f"SELECT g.name FROM groups g WHERE {LIVE_GROUP} ORDER BY g.name")]


def resolve_address(db: pw.SqliteDatabase, name: str) -> tuple[str, str] | None:
    """What a ``--to``/``--mention`` value names: ("everyone", "everyone"), ("agent", n),
    ("role", r) or ("group", g), checked in that order; None when it names nothing known."""
    n = bare_name(name)
    if not n:
        return None
    if n == EVERYONE:
        return (EVERYONE, EVERYONE)
    if one_row(db, f"SELECT 1 FROM agents a WHERE a.agent_id = ? AND {LIVE_AGENT}", (n,)):
        return ("agent", n)
    if one_row(db, f"SELECT 1 FROM agents a WHERE a.role = ? AND {LIVE_AGENT} LIMIT 1", (n,)):
        return ("role", n)
    if group_row(db, n) is not None:
        return ("group", n)
    return None


def ambiguity(db: pw.SqliteDatabase, name: str) -> list[str]:
    """What else ``name`` means besides the first of agent → role → group (rule 1): the
    kinds it names, when more than one ("agent", "role", "group"); else empty."""
    n = bare_name(name)
    kinds = []
    if one_row(db, f"SELECT 1 FROM agents a WHERE a.agent_id = ? AND {LIVE_AGENT}", (n,)):
        kinds.append("agent")
    if one_row(db, f"SELECT 1 FROM agents a WHERE a.role = ? AND a.agent_id != ? AND {LIVE_AGENT} LIMIT 1", (n, n)):
        kinds.append("role")
    if group_row(db, n) is not None:
        kinds.append("group")
    return kinds if len(kinds) > 1 else []


def close_matches(db: pw.SqliteDatabase, name: str) -> list[str]:
    """Known addresses that look like ``name`` (with ``@``), for "did you mean" errors."""
    candidates = sorted(set(live_agents(db)) | set(_roles(db)) | set(_group_names(db)) | {EVERYONE})
    return ["@" + c for c in difflib.get_close_matches(bare_name(name), candidates, n=5, cutoff=0.6)]


def _typo_distance(a: str, b: str, limit: int) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) from ``a`` to ``b``; any
    value over ``limit`` is returned as ``limit + 1`` (the rows stop early)."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                row[j] = min(row[j], prev2[j - 2] + 1)
        if min(row) > limit:
            return limit + 1
        prev2, prev = prev, row
    return min(prev[-1], limit + 1)


def looks_like_typo(db: pw.SqliteDatabase, name: str) -> list[str]:
    """Known addresses ``name`` is a slip of the keyboard away from (one edit for names of
    up to 5 characters, two for longer ones), with ``@``; empty when it looks new."""
    n = bare_name(name)
    limit = 1 if len(n) <= 5 else 2
    candidates = set(live_agents(db)) | set(_roles(db)) | set(_group_names(db)) | {EVERYONE}
    return ["@" + c for c in sorted(candidates) if c != n and _typo_distance(n, c, limit) <= limit]


def _deleted_agent(db: pw.SqliteDatabase, name: str) -> bool:
    return one_row(db, f"SELECT 1 FROM agents a WHERE a.agent_id = ? AND NOT ({LIVE_AGENT})", (name,)) is not None


def resolve_recipients(
    db: pw.SqliteDatabase, addresses: list[str], *, pending_roles: bool = False
) -> list[dict[str, Any]]:
    """``to``/``mentions`` addresses (``@name``) → ``{address, kind, value}``, each once, in order.

    With ``pending_roles``, an address that names nothing known yet is a role nobody
    holds yet (the spec's ``--to @role``): ``kind`` "role" and ``pending`` true; the
    message waits for the role's first holder (mentions resolve when read). It is
    still refused when it looks like a slip for a known address (`looks_like_typo`),
    names a deleted agent, is reserved, or is not a name at all.

    Raises:
        UnknownRecipient: an address names no agent, role or group (with close matches).
    """
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for raw in addresses:
        bare = raw[1:] if raw.startswith("@") else raw
        hit = resolve_address(db, bare) if bare else None
        if hit is not None and hit[0] != EVERYONE:
            both = ambiguity(db, bare)
            if both:
                raise _ambiguous(raw, bare, both)
        pending = False
        if hit is None:
            if pending_roles and _may_be_new_role(db, bare):
                hit, pending = ("role", bare), True
            else:
                raise _unknown(db, raw, bare)
        if bare not in seen:
            seen.add(bare)
            item: dict[str, Any] = {"address": f"@{bare}", "kind": hit[0], "value": bare}
            if pending:
                item["pending"] = True
            out.append(item)
    return out


def _may_be_new_role(db: pw.SqliteDatabase, name: str) -> bool:
    return (
        NAME_RE.fullmatch(name) is not None
        and name not in RESERVED_NAMES
        and not _deleted_agent(db, name)
        and not looks_like_typo(db, name)
    )


def _ambiguous(raw: str, bare: str, kinds: list[str]) -> Conflict:
    what = " and ".join({"agent": "an agent", "role": "a role other agents hold", "group": "a group"}[k] for k in kinds)
    return Conflict(
        f"recipient {raw!r} is ambiguous: @{bare} names {what} (one came from the log, not through thrum); "
        f"remove the one that shadows the other (`thrum agent delete {bare} --force` or `thrum group delete {bare}`) "
        "and send again",
        data={"address": raw, "kinds": kinds},
    )


def _unknown(db: pw.SqliteDatabase, raw: str, bare: str) -> UnknownRecipient:
    close = (looks_like_typo(db, bare) or close_matches(db, bare)) if bare else []
    if bare in ("all", "broadcast") and "@everyone" not in close:
        close = ["@everyone", *close]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    what = "no agent, role or group by that name"
    if bare and _deleted_agent(db, bare):
        what = "that agent was deleted"
    return UnknownRecipient(f"unknown recipient {raw!r}: {what}{hint}", data={"address": raw, "close_matches": close})
