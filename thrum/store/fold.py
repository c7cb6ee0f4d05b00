"""Folding events into the SQLite projection: one transaction per batch, one handler per type.

The rules every handler keeps are the projection's (`thrum.store.projection`,
tested as properties in tests/store/test_projection_properties.py). Here:

- `fold` applies (shard, event) records in one transaction: events a shard may
  not carry are refused as forged (`events.ShardRule`), duplicates are counted,
  and the rest are handed to the handlers grouped by type in a fixed order
  (`_ORDER`), each handler working on a set of rows.
- The log is untrusted: an event a handler cannot apply is found by folding the
  batch again one event at a time (each in a savepoint), recorded as an
  ``invalid`` fold issue, and the others are folded; nothing the log holds can
  make the fold fail.
- The handlers: the message lifecycle (create, edit, delete) and the read,
  unread and archive marks are in `thrum.store.message_fold`; ack requests and
  delivery states in `thrum.store.delivery_fold`; agents,
  sessions, groups and threads in `thrum.store.directory_fold`.
- Read positions in the log are saved in the same transaction as what was read.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import peewee as pw

from .. import events as ev
from . import chain_fold, delivery_fold, directory_fold, idempotency, message_fold
from . import held as held_lines
from . import issues as issues_mod
from .log import LogIssue, Position
from .sql import all_rows, chunks, qmarks

log = logging.getLogger(__name__)

Record = tuple[str, dict[str, Any]]  # (shard, normalised event): what the log reader gives


def dedup_key(d: dict[str, Any]) -> str:
    """What makes an event "already applied": its id and its author (who signed it).

    With the id alone, another agent writing a line with an id it copied from
    someone else's event could make a replica skip the original as a duplicate.
    """
    return f"{d.get('event_id', '')}/{ev.event_author(d) or ''}"


@dataclass
class FoldResult:
    applied: list[dict[str, Any]] = field(default_factory=list)  # newly applied events, for publishing
    duplicates: int = 0
    forged: int = 0
    unknown: int = 0
    conflicts: int = 0
    malformed: int = 0
    invalid: int = 0  # events a handler could not apply (recorded in fold_issues)
    refused: int = 0  # lines the trust check quarantined (thrum.trust.verify)
    timings: dict[str, float] = field(default_factory=dict)  # rebuild: seconds per phase

    def merge(self, other: "FoldResult") -> None:
        self.applied.extend(other.applied)
        self.duplicates += other.duplicates
        self.forged += other.forged
        self.unknown += other.unknown
        self.conflicts += other.conflicts
        self.malformed += other.malformed
        self.invalid += other.invalid
        self.refused += other.refused


class Folder:
    """One fold transaction: holds the connection and the running result."""

    def __init__(self, conn: sqlite3.Connection, result: FoldResult, now: str):
        self.c = conn
        self.r = result
        self.now = now
        self.sigs: dict[tuple[str, ...], int] = {}
        self.sigs_by_mentions: dict[tuple[str, ...], int] = {}  # `mentions_sig`'s: mentions as written -> id
        self.keep_applied = True
        self._issues: issues_mod.Recorder | None = None

    # ---------------------------------------------------------------- mention sets
    def sig_id(self, targets: tuple[str, ...]) -> int:
        """The id of a (sorted) mention set, created on first use."""
        sid = self.sigs.get(targets)
        if sid is None:
            text = ev.dumps(list(targets)).decode()
            row = self.c.execute("SELECT sig_id FROM mention_sigs WHERE sig=?", (text,)).fetchone()
            if row is not None:
                sid = row[0]
            else:
                sid = self.c.execute("INSERT INTO mention_sigs(sig) VALUES (?)", (text,)).lastrowid
                assert sid is not None  # an INSERT into a rowid table sets it
                self.c.executemany(
                    "INSERT OR IGNORE INTO mention_sig_targets(target, sig_id) VALUES (?,?)",
                    [(t, sid) for t in targets],
                )
            self.sigs[targets] = sid
        return sid

    def mentions_sig(self, mentions: tuple[str, ...]) -> int:
        """The id of the mention set of a message whose mention refs are ``mentions`` (as
        written, in order): the targets without a leading ``@``, once each, sorted."""
        sid = self.sigs_by_mentions.get(mentions)
        if sid is None:
            targets = {m[1:] if m[:1] == "@" else m for m in mentions}
            targets.discard("")
            sid = self.sigs_by_mentions[mentions] = self.sig_id(tuple(sorted(targets)))
        return sid

    def forget_sigs(self) -> None:
        """Drop the cached ids (those made in an undone savepoint may not exist any more)."""
        self.sigs.clear()
        self.sigs_by_mentions.clear()

    # ---------------------------------------------------------------- issues
    def issue(self, kind: str, shard: str, event_id: str, reason: str) -> bool:
        """Record a refused line/event once; True when it was not recorded before (`thrum.store.issues`)."""
        if self._issues is None:
            self._issues = issues_mod.Recorder(self.c, self.now)
        return self._issues.record(kind, shard, event_id, reason)

    # ---------------------------------------------------------------- entry
    def fold(self, records: Iterable[Record]) -> None:
        # Keyed by event id *and author* (`dedup_key`): an event id another agent
        # reuses never hides the original (docs/design/trust.md).
        candidates: dict[str, dict[str, Any]] = {}
        rules: dict[str, ev.ShardRule] = {}  # shard -> its authorship rule, the path parsed once
        known, version = ev.SCHEMAS, ev.EVENT_VERSION
        for shard, d in records:
            t = d.get("type")
            if t not in known or d.get("v", 1) > version:
                self.r.unknown += 1
                continue
            rule = rules.get(shard)
            if rule is None:
                rule = rules[shard] = ev.ShardRule(shard)
            ok = rule.allows(d)
            if not ok:
                self.r.forged += 1
                self.issue(
                    "forged",
                    shard,
                    d.get("event_id", ""),
                    f"{d['type']} by {ev.event_owner(d) or '?'} does not belong in {shard}",
                )
                continue
            eid = dedup_key(d)
            if eid in candidates:
                self.r.duplicates += 1
                continue
            candidates[eid] = d
        if not candidates:
            return
        # message.create is checked against the messages table (its winner's event_id
        # is there); everything else against applied_events. A rebuild so skips a
        # million applied_events rows for the creates.
        by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
        others: list[str] = []
        creates = by_type["message.create"]
        for eid, d in candidates.items():
            if d["type"] == "message.create":
                creates.append(d)
            else:
                others.append(eid)
        seen: set[str] = set()
        for chunk in chunks(others):
            seen.update(
                row[0]
                for row in self.c.execute(
                    f"SELECT event_id FROM applied_events WHERE event_id IN ({qmarks(len(chunk))})", chunk
                )
            )
        self.r.duplicates += len(seen)
        fresh = [eid for eid in others if eid not in seen]
        if fresh:
            self.c.executemany("INSERT INTO applied_events(event_id) VALUES (?)", [(eid,) for eid in fresh])
        for eid in fresh:
            d = candidates[eid]
            by_type[d["type"]].append(d)
        new_creates: set[str] = set()
        for etype, handler in _ORDER:
            batch = by_type.get(etype)
            if batch:
                if etype == "message.create":  # the one handler that says what it applied
                    new_creates = message_fold.message_create(self, batch)
                else:
                    handler(self, batch)
        directory_fold.last_seen(self, candidates.values())  # duplicates too: a time never moves back
        chain_fold.track(self.c, candidates.values(), self.now)  # duplicates too: a known link is a no-op
        keyed = [d for t in idempotency.KEYED_TYPES for d in by_type.get(t, ()) if "idempotency_key" in d]
        if keyed:
            idempotency.index_keys(self.c, keyed)
        if self.keep_applied:
            self.r.applied.extend(
                d
                for eid, d in candidates.items()
                if (d["event_id"] in new_creates if d["type"] == "message.create" else eid not in seen)
            )


def applied_since(db: pw.SqliteDatabase, author: str, first_event_id: str) -> bool:
    """Whether any event of ``author`` with an id from ``first_event_id`` on was applied
    (a key retired now may cover it: thrum.store.verified)."""
    pattern = "%/" + author.replace("\\", "\\\\").replace("_", "\\_").replace("%", "\\%")
    row = db.execute_sql(
        "SELECT 1 FROM applied_events WHERE event_id >= ? AND event_id LIKE ? ESCAPE '\\' LIMIT 1",
        (first_event_id, pattern),
    ).fetchone()
    if row is not None:
        return True
    row = db.execute_sql(  # message.create is deduplicated by the messages table, not applied_events
        "SELECT 1 FROM messages WHERE agent_id = ? AND event_id >= ? LIMIT 1", (author, first_event_id)
    ).fetchone()
    return row is not None


def _nothing(folder: Folder, batch: list[dict[str, Any]]) -> None:
    return None


_ORDER = [
    ("agent.register", directory_fold.agent_register),
    ("agent.cleanup", directory_fold.agent_cleanup),
    ("agent.session.start", directory_fold.session_start),
    ("agent.session.end", directory_fold.session_end),
    ("group.create", directory_fold.group_create),
    ("group.delete", directory_fold.group_delete),
    ("group.member.add", directory_fold.group_member),
    ("group.member.remove", directory_fold.group_member),
    ("thread.create", directory_fold.thread_create),
    ("message.create", message_fold.message_create),
    ("message.edit", message_fold.message_edit),
    ("message.delete", message_fold.message_delete),
    ("message.read", message_fold.receipt),
    ("message.unread", message_fold.receipt),
    ("message.archive", message_fold.receipt),
    ("message.delivered", delivery_fold.delivery_receipt),
    ("message.surfaced", delivery_fold.delivery_receipt),
    ("message.acked", delivery_fold.delivery_receipt),
    ("agent.update", directory_fold.agent_update),
    ("agent.heartbeat", _nothing),  # only when the agent was last seen (directory_fold.last_seen)
    # Judged by the trust check (thrum.trust.roster), which keeps what they say; nothing to fold.
    ("agent.admit", _nothing),
    ("agent.rotate", _nothing),
    ("agent.revoke", _nothing),
]
assert {t for t, _ in _ORDER} == set(ev.EVENT_TYPES)


def fold(
    db: pw.SqliteDatabase,
    records: Iterable[Record],
    *,
    issues: Iterable[LogIssue] = (),
    positions: dict[str, Position] | None = None,
    keep_applied: bool = True,
    refused: Iterable[tuple[str, str, str, str]] = (),
    resolved: Iterable[str] = (),
    held: Iterable[held_lines.HeldRow] = (),
) -> FoldResult:
    """Apply (shard, event) records in one transaction; optionally record malformed
    lines and store new read positions in the same transaction.

    ``refused``: (kind, shard, event_id, reason) of lines the trust check quarantined,
    recorded in ``fold_issues``; ``resolved``: keys of issues that no longer hold (a
    line that waited for its signer's key, or for its time, and has now been judged:
    a held line of that key is let go too); ``held``: lines dated ahead, kept until
    their time comes (`thrum.store.held`).

    ``keep_applied=False`` leaves `FoldResult.applied` empty (bulk loads).
    """
    records = records if isinstance(records, list) else list(records)
    result = FoldResult()
    now = ev.now_rfc3339()
    with db.atomic():
        conn = db.connection()
        again = [shard for shard, p in (positions or {}).items() if p.again]
        if again:  # read again from their start: what was counted of them is counted afresh
            issues_mod.recount(conn, again)
        folder = Folder(conn, result, now)
        folder.keep_applied = keep_applied
        try:
            _in_savepoint(conn, folder.fold, records)
        except _CONTENT_ERRORS as exc:
            # Some event made a handler fail. The log is untrusted input: find the
            # event(s) by folding one at a time, record them, and fold the rest.
            log.warning(
                "a fold batch of %d events failed (%s: %s); folding them one by one",
                len(records),
                type(exc).__name__,
                exc,
            )
            result = folder.r = FoldResult()
            folder.forget_sigs()  # ids cached during the undone attempt may not exist any more
            for shard, d in records:
                try:
                    _in_savepoint(conn, folder.fold, [(shard, d)])
                except _CONTENT_ERRORS as one:
                    folder.forget_sigs()
                    result.invalid += 1
                    eid = d.get("event_id") if isinstance(d, dict) else None
                    folder.issue(
                        "invalid",
                        shard,
                        str(eid or "?")[:64],
                        f"cannot apply this event ({type(one).__name__}: {str(one)[:200]})",
                    )
        gone = list(resolved)  # before the new issues: a line judged again may be refused again
        if gone:
            issues_mod.resolve(conn, gone)
            held_lines.release(conn, [k for k in gone if k.startswith("future:")])
        for kind, shard, event_id, reason in refused:
            folder.issue(kind, shard, event_id, reason)
            result.refused += 1
        held = list(held)
        if held:
            held_lines.hold(conn, held)
        for issue in issues:
            digest = hashlib.sha1(issue.line).hexdigest()[:16]
            folder.issue("malformed", issue.shard, digest, issue.reason)
            result.malformed += 1
        if positions:
            save_positions(db, positions)
    return result


# Errors an event's content can cause in a handler. sqlite3.OperationalError and
# DatabaseError (disk I/O, a corrupt file) are not among them: those are about the
# database, not the event, and must reach the caller (which repairs or reports).
_CONTENT_ERRORS = (
    KeyError,
    TypeError,
    ValueError,
    AttributeError,
    IndexError,
    OverflowError,
    RecursionError,
    sqlite3.IntegrityError,
    sqlite3.InterfaceError,
    sqlite3.DataError,
)


class UndoImpossible(Exception):
    """A fold batch failed on a connection that keeps no journal (a rebuild's load,
    ``journal_mode=OFF``), where ``ROLLBACK TO`` undoes nothing: what the batch wrote
    before it failed stays, so folding its events again one by one would apply them on
    top of it. The rebuild loads again with a journal (`rebuild.rebuild`)."""


def _in_savepoint(conn: sqlite3.Connection, fn: Callable[[list[Record]], None], records: list[Record]) -> None:
    """Run ``fn(records)`` so that its writes are undone if it raises; raises
    `UndoImpossible` instead when the connection keeps no journal to undo them with."""
    conn.execute("SAVEPOINT thrum_fold")
    try:
        fn(records)
    except BaseException as exc:
        conn.execute("ROLLBACK TO thrum_fold")
        conn.execute("RELEASE thrum_fold")
        if isinstance(exc, _CONTENT_ERRORS) and conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "off":
            raise UndoImpossible(f"{type(exc).__name__}: {exc}") from exc
        raise
    conn.execute("RELEASE thrum_fold")


def load_positions(db: pw.SqliteDatabase) -> dict[str, Position]:
    """How far each shard of the log has been folded."""
    return {
        shard: Position(offset, tail)
        for shard, offset, tail in all_rows(db, "SELECT shard, offset, tail FROM log_positions")
    }


def save_positions(db: pw.SqliteDatabase, positions: dict[str, Position]) -> None:
    db.connection().executemany(
        "INSERT INTO log_positions(shard, offset, tail) VALUES (?,?,?) ON CONFLICT(shard) DO UPDATE "
        "SET offset=excluded.offset, tail=excluded.tail",
        [(s, p.offset, p.tail) for s, p in positions.items()],
    )
