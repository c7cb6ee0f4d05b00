"""Does the projection cover the log? A cheap check at start-up, and the repair.

Read positions are stored in the same transaction as the fold of the lines they
cover, and the writer never moves them past a line it could not fold, so after
`projection.catch_up` the projection covers every shard up to its end. This
check guards the invariant against what the writer cannot see (a database file
restored from a backup or edited by hand, a bug): for every shard, the event on
the last line before its stored position must be in the projection. A shard
whose last event is missing is folded again from its first line (the fold is
idempotent, so this costs time, never correctness).

It reads one line per shard and asks one indexed query per shard (~75 us a shard:
under a second for the ~11,500 shards of a million events), so it runs at every
start that kept its projection; a start that rebuilt it from the whole log skips it
(`rebuild.Opened`: covered by construction).
"""

from __future__ import annotations

from typing import Iterable

import hashlib
import logging
import os

import peewee as pw

from .. import events as ev
from . import issues as issues_mod
from .fold import FoldResult, dedup_key, load_positions, save_positions
from .log import EventLog, Position
from .rebuild import FoldFn, catch_up

log = logging.getLogger(__name__)

MAX_LINE_PROBE = 1024 * 1024  # a last line longer than this is not checked (it would be one odd line)


def last_line_before(event_log: EventLog, shard: str, offset: int) -> bytes | None:
    """The complete line that ends at ``offset`` (which follows a newline), or None."""
    if offset <= 0:
        return None
    try:
        fd = os.open(event_log.path(shard), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except (OSError, ValueError):
        return None
    try:
        if os.fstat(fd).st_size < offset:
            return None
        span = 4096
        while True:
            lo = max(0, offset - span)
            data = os.pread(fd, offset - lo, lo)
            if not data.endswith(b"\n"):
                return None
            start = data.rfind(b"\n", 0, len(data) - 1)
            if start >= 0 or lo == 0:
                return data[start + 1 : -1]
            if span >= MAX_LINE_PROBE:
                return None
            span *= 4
    finally:
        os.close(fd)


def is_folded(db: pw.SqliteDatabase, shard: str, line: bytes) -> bool:
    """Whether the projection knows this line: applied, or refused and recorded as such."""
    if not line.strip():
        return True
    try:
        d = ev.decode_line(line)
    except ev.MalformedEvent:
        key = f"malformed:{shard}:{hashlib.sha1(line[:200]).hexdigest()[:16]}"
        return _exists(db, "SELECT 1 FROM fold_issues WHERE key=? OR key=?", key, f"malformed:{shard}:*")
    eid = d.get("event_id", "")
    if d.get("type") not in ev.SCHEMAS or d.get("v", 1) > ev.EVENT_VERSION:
        return True  # a type this build does not fold (a seal, a future event): nothing to find
    if d["type"] == "message.create" and _exists(
        db, "SELECT 1 FROM messages WHERE message_id=?", d.get("message_id", "")
    ):
        return True
    if _exists(db, "SELECT 1 FROM applied_events WHERE event_id=?", dedup_key(d)):
        return True
    # refused (forged, invalid, quarantined by the trust check): recorded, which is covered;
    # past the bound of rows per kind, lines are only counted per file (store/issues.py)
    return _exists(db, "SELECT 1 FROM fold_issues WHERE shard=? AND (event_id=? OR count IS NOT NULL)", shard, eid)


def _exists(db: pw.SqliteDatabase, sql: str, *args: str) -> bool:
    return db.execute_sql(sql, args).fetchone() is not None


def uncovered_shards(db: pw.SqliteDatabase, event_log: EventLog) -> list[str]:
    """Shards whose last folded line is missing from the projection."""
    out = []
    for shard, pos in load_positions(db).items():
        line = last_line_before(event_log, shard, pos.offset)
        if line is not None and not is_folded(db, shard, line):
            out.append(shard)
    return out


def ensure_covered(
    db: pw.SqliteDatabase, event_log: EventLog, fold_fn: FoldFn | None = None, reread: Iterable[str] = ()
) -> tuple[list[str], FoldResult]:
    """Catch up, check every shard, fold again from the start any that is not covered.

    ``reread``: shards to fold again from their start anyway (an offline sync merged
    into them, and a merge may replace a line in place). Returns the shards repaired
    (usually none) and what folding applied.
    """
    again = [shard for shard in reread if ev.is_log_path(shard)]
    if again:
        with db.atomic():
            save_positions(db, {shard: Position() for shard in again})
            issues_mod.recount(db.connection(), again)
    result = catch_up(db, event_log, fold_fn)
    gaps = uncovered_shards(db, event_log)
    if gaps:
        log.warning(
            "the projection misses events of %d log file(s) (%s); folding them again",
            len(gaps),
            ", ".join(gaps[:5]) + (" ..." if len(gaps) > 5 else ""),
        )
        with db.atomic():
            save_positions(db, {shard: Position() for shard in gaps})
            issues_mod.recount(db.connection(), gaps)
        result.merge(catch_up(db, event_log, fold_fn))
    return gaps, result
