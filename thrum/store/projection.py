"""Fold log events into the SQLite projection.

Rules (tested as properties in tests/store/test_projection_properties.py):

1. Idempotent: an event is applied at most once (``applied_events`` by event_id;
   a winning message.create is known by the ``messages`` row it wrote).
2. Order-independent: any arrival order of the same events gives the same state.
   Edits and deletes that arrive before their message are stored and take effect
   when it arrives; concurrent edits resolve last-writer-wins by event_id; the
   first delete (by event_id) is final and edits after it are ignored; of two
   creates for one message_id the lowest event_id wins. Read state is
   last-writer-wins per (agent, message); archive marks are final. Every
   handler is idempotent on its own as well (all comparisons are strict), so
   ``applied_events`` is an optimisation and the source of "what is new", not
   what keeps state correct.
3. Untrusted input: a shard only carries its own agent's events
   (`events.allowed_in_shard`); only a message's author edits or deletes it.
   Violations are skipped, counted and recorded in ``fold_issues``; nothing
   is deleted from the log.
4. A batch is folded in one transaction, grouped by type in a fixed order; each
   handler works on sets of rows, which is what makes a rebuild fast.
5. Derived tables (mention sets, counters) are kept by triggers on every change
   (models.COUNTER_TRIGGERS); a rebuild loads without them and computes them once.

`rebuild` and `catch_up` give identical query results for the same log.

Known limit: two *different* events that share an event_id (only a hostile
writer makes those) are resolved by arrival order.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

import peewee as pw

from .. import events as ev
from ..events import time_key
from . import idempotency, models
from .log import EventLog, LogIssue, Position, ReadResult
from .sql import chunks, qmarks

log = logging.getLogger(__name__)

REBUILD_BATCH = 50_000
READ_CHUNK = 32 * 1024 * 1024  # bytes of a shard read (and folded) at a time
REBUILD_CACHE_KIB = -512 * 1024  # SQLite page cache while rebuilding (negative: KiB)


@dataclass
class FoldResult:
    applied: list[dict] = field(default_factory=list)  # newly applied events, for publishing
    duplicates: int = 0
    forged: int = 0
    unknown: int = 0
    conflicts: int = 0
    malformed: int = 0
    invalid: int = 0  # events a handler could not apply (recorded in fold_issues)
    timings: dict[str, float] = field(default_factory=dict)  # rebuild: seconds per phase

    def merge(self, other: "FoldResult") -> None:
        self.applied.extend(other.applied)
        self.duplicates += other.duplicates
        self.forged += other.forged
        self.unknown += other.unknown
        self.conflicts += other.conflicts
        self.malformed += other.malformed
        self.invalid += other.invalid


class _Folder:
    """One fold transaction: holds the connection and the running result."""

    def __init__(self, conn, result: FoldResult, now: str):
        self.c = conn
        self.r = result
        self.now = now
        self.sigs: dict[tuple, int] = {}
        self.keep_applied = True

    # ---------------------------------------------------------------- mention sets
    def sig_id(self, targets: tuple) -> int:
        """The id of a (sorted) mention set, created on first use."""
        sid = self.sigs.get(targets)
        if sid is None:
            text = ev.dumps(list(targets)).decode()
            row = self.c.execute("SELECT sig_id FROM mention_sigs WHERE sig=?", (text,)).fetchone()
            if row is not None:
                sid = row[0]
            else:
                sid = self.c.execute("INSERT INTO mention_sigs(sig) VALUES (?)", (text,)).lastrowid
                self.c.executemany("INSERT OR IGNORE INTO mention_sig_targets(target, sig_id) VALUES (?,?)",
                                   [(t, sid) for t in targets])
            self.sigs[targets] = sid
        return sid

    # ---------------------------------------------------------------- issues
    def issue(self, kind: str, shard: str, event_id: str, reason: str) -> bool:
        """Record a refused line/event once; True when it was not recorded before."""
        key = f"{kind}:{shard}:{event_id}"
        cur = self.c.execute(
            "INSERT OR IGNORE INTO fold_issues(key, kind, shard, event_id, reason, seen_at) "
            "VALUES (?,?,?,?,?,?)", (key, kind, shard, event_id, reason[:500], self.now))
        return cur.rowcount == 1

    # ---------------------------------------------------------------- entry
    def fold(self, records: Iterable[tuple[str, dict]]) -> None:
        candidates: dict[str, dict] = {}
        rules: dict[str, ev.ShardRule] = {}  # shard -> its authorship rule, the path parsed once
        known = ev.NORMALISERS
        for shard, d in records:
            eid = d.get("event_id", "")
            t = d.get("type")
            if t not in known or d.get("v", 1) > ev.EVENT_VERSION:
                self.r.unknown += 1
                continue
            rule = rules.get(shard)
            if rule is None:
                rule = rules[shard] = ev.ShardRule(shard)
            ok = rule.allows(d)
            if not ok:
                self.r.forged += 1
                self.issue("forged", shard, eid, f"{d['type']} by {ev.event_owner(d) or '?'} "
                                                 f"does not belong in {shard}")
                continue
            if eid in candidates:
                self.r.duplicates += 1
                continue
            candidates[eid] = d
        if not candidates:
            return
        # message.create is checked against the messages table (its winner's event_id
        # is there); everything else against applied_events. A rebuild so skips a
        # million applied_events rows for the creates.
        others = [eid for eid, d in candidates.items() if d["type"] != "message.create"]
        seen = set()
        for chunk in chunks(others):
            seen.update(row[0] for row in self.c.execute(
                f"SELECT event_id FROM applied_events WHERE event_id IN ({qmarks(len(chunk))})", chunk))
        self.r.duplicates += len(seen)
        fresh = [eid for eid in others if eid not in seen]
        if fresh:
            self.c.executemany("INSERT INTO applied_events(event_id) VALUES (?)", [(eid,) for eid in fresh])
        by_type: dict[str, list[dict]] = defaultdict(list)
        for eid, d in candidates.items():
            if eid not in seen:
                by_type[d["type"]].append(d)
        new_creates: set[str] = set()
        for etype, handler in _ORDER:
            batch = by_type.get(etype)
            if batch:
                if etype == "message.create":
                    new_creates = handler(self, batch)
                else:
                    handler(self, batch)
        keyed = [d for t in idempotency.KEYED_TYPES for d in by_type.get(t, ()) if "idempotency_key" in d]
        if keyed:
            idempotency.index_keys(self.c, keyed)
        if self.keep_applied:
            self.r.applied.extend(d for eid, d in candidates.items()
                                  if (eid in new_creates if d["type"] == "message.create" else eid not in seen))

    # ---------------------------------------------------------------- agents, sessions
    def agent_register(self, batch):
        for d in batch:
            self.c.execute(
                "INSERT INTO agents(agent_id, kind, name, role, module, worktree, display, "
                "registered_at, event_id, cleanup_reason) VALUES (?,?,?,?,?,?,?,?,?, '') "
                "ON CONFLICT(agent_id) DO UPDATE SET kind=excluded.kind, name=excluded.name, "
                "role=excluded.role, module=excluded.module, worktree=excluded.worktree, "
                "display=excluded.display, event_id=excluded.event_id "
                "WHERE agents.event_id IS NULL OR excluded.event_id > agents.event_id",
                (d["agent_id"], d["kind"], d["name"], d["role"], d["module"], d["worktree"],
                 d["display"], d["timestamp"], d["event_id"]))
            self.c.execute(
                "UPDATE agents SET registered_at=? WHERE agent_id=? "
                "AND (registered_at IS NULL OR registered_at > ?)",
                (d["timestamp"], d["agent_id"], d["timestamp"]))

    def agent_cleanup(self, batch):
        for d in batch:
            self.c.execute(
                "INSERT INTO agents(agent_id, cleanup_event_id, cleanup_reason, module, worktree, display) "
                "VALUES (?,?,?, '', '', '') ON CONFLICT(agent_id) DO UPDATE SET "
                "cleanup_event_id=excluded.cleanup_event_id, cleanup_reason=excluded.cleanup_reason "
                "WHERE agents.cleanup_event_id IS NULL OR excluded.cleanup_event_id > agents.cleanup_event_id",
                (d["agent_id"], d["event_id"], d["reason"]))

    def agent_update(self, batch):
        for d in batch:
            for ctx in d["work_contexts"]:
                sid = ctx.get("session_id")
                if not isinstance(sid, str) or not sid:
                    continue
                git_at = ctx.get("git_updated_at") if isinstance(ctx.get("git_updated_at"), str) else ""
                self.c.execute(
                    "INSERT INTO agent_contexts(agent_id, session_id, context, git_updated_at, event_id) "
                    "VALUES (?,?,?,?,?) ON CONFLICT(agent_id, session_id) DO UPDATE SET "
                    "context=excluded.context, git_updated_at=excluded.git_updated_at, "
                    "event_id=excluded.event_id WHERE excluded.git_updated_at > agent_contexts.git_updated_at "
                    "OR (excluded.git_updated_at = agent_contexts.git_updated_at "
                    "AND excluded.event_id > agent_contexts.event_id)",
                    (d["agent_id"], sid, ev.dumps(ctx).decode(), git_at, d["event_id"]))

    def session_start(self, batch):
        for d in batch:
            self.c.execute(
                "INSERT INTO sessions(session_id, agent_id, started_at, start_event_id) VALUES (?,?,?,?) "
                "ON CONFLICT(session_id) DO UPDATE SET agent_id=excluded.agent_id, "
                "started_at=excluded.started_at, start_event_id=excluded.start_event_id "
                "WHERE sessions.start_event_id IS NULL OR excluded.start_event_id < sessions.start_event_id",
                (d["session_id"], d["agent_id"], d["timestamp"], d["event_id"]))

    def session_end(self, batch):
        for d in batch:
            self.c.execute(
                "INSERT INTO sessions(session_id, agent_id, ended_at, end_reason, end_event_id) "
                "VALUES (?,?,?,?,?) ON CONFLICT(session_id) DO UPDATE SET "
                "ended_at=excluded.ended_at, end_reason=excluded.end_reason, "
                "end_event_id=excluded.end_event_id, "
                "agent_id=CASE WHEN sessions.start_event_id IS NULL THEN excluded.agent_id "
                "ELSE sessions.agent_id END "
                "WHERE sessions.end_event_id IS NULL OR excluded.end_event_id < sessions.end_event_id",
                (d["session_id"], d["agent_id"], d["timestamp"], d["reason"], d["event_id"]))

    # ---------------------------------------------------------------- groups, threads
    def group_create(self, batch):
        for d in batch:
            self.c.execute(
                "INSERT INTO groups(name, group_id, description, created_by, created_at, event_id) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(name) DO UPDATE SET group_id=excluded.group_id, "
                "description=excluded.description, created_by=excluded.created_by, "
                "created_at=excluded.created_at, event_id=excluded.event_id "
                "WHERE groups.event_id IS NULL OR excluded.event_id > groups.event_id",
                (d["name"], d["group_id"], d["description"], d["created_by"], d["timestamp"], d["event_id"]))

    def group_delete(self, batch):
        for d in batch:
            self.c.execute(
                "INSERT INTO groups(name, description, created_by, deleted_event_id) VALUES (?, '', '', ?) "
                "ON CONFLICT(name) DO UPDATE SET deleted_event_id=excluded.deleted_event_id "
                "WHERE groups.deleted_event_id IS NULL OR excluded.deleted_event_id > groups.deleted_event_id",
                (d["name"], d["event_id"]))

    def group_member(self, batch):
        for d in batch:
            state = "add" if d["type"] == "group.member.add" else "remove"
            self.c.execute(
                "INSERT INTO group_members(group_name, member_type, member_value, state, event_id, "
                "changed_by, changed_at) VALUES (?,?,?,?,?,?,?) "
                "ON CONFLICT(group_name, member_type, member_value) DO UPDATE SET state=excluded.state, "
                "event_id=excluded.event_id, changed_by=excluded.changed_by, changed_at=excluded.changed_at "
                "WHERE excluded.event_id > group_members.event_id",
                (d["group"], d["member_type"], d["member_value"], state, d["event_id"],
                 d["agent_id"], d["timestamp"]))

    def thread_create(self, batch):
        for d in batch:
            self.c.execute(
                "INSERT INTO threads(thread_id, title, created_by, created_at, event_id) VALUES (?,?,?,?,?) "
                "ON CONFLICT(thread_id) DO UPDATE SET title=excluded.title, created_by=excluded.created_by, "
                "created_at=excluded.created_at, event_id=excluded.event_id "
                "WHERE excluded.event_id < threads.event_id",
                (d["thread_id"], d["title"], d["created_by"], d["timestamp"], d["event_id"]))

    # ---------------------------------------------------------------- messages
    def message_create(self, batch) -> set[str]:
        """Insert new messages; returns the event ids applied now (not duplicates).

        Optimistic: the batch (its own id conflicts resolved first) is inserted with
        INSERT OR IGNORE; only when some id already existed are those looked at.
        """
        batch.sort(key=lambda d: d["event_id"])
        first: dict[str, dict] = {}
        later: list[dict] = []
        for d in batch:  # lowest event_id first: the first create of an id in the batch wins within it
            if d["message_id"] in first:
                later.append(d)
            else:
                first[d["message_id"]] = d
        rows, scopes, refs = self._message_rows(list(first.values()))
        max_rowid = self.c.execute("SELECT coalesce(max(rowid), 0) FROM messages").fetchone()[0]
        inserted = self.c.executemany(
            "INSERT OR IGNORE INTO messages(message_id, agent_id, session_id, created_at, body_format, body_content, "
            "body_structured, thread_id, priority, authored_by, disclosed, event_id, created_key, updated_key, "
            "sig_id, deleted, edit_count) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,0)", rows).rowcount
        applied = set(d["event_id"] for d in first.values())
        pending: set[str] = set()
        if inserted != len(rows):  # some ids were already there: sort those out one by one
            clashing = self._clashing(first, max_rowid)
            scopes = [s for s in scopes if s[0] not in clashing]
            refs = [r for r in refs if r[0] not in clashing]
            for mid, (old_eid, old_author) in clashing.items():
                d = first[mid]
                if old_eid == d["event_id"] or self._applied(d["event_id"]):
                    self.r.duplicates += 1
                    applied.discard(d["event_id"])
                elif old_eid < d["event_id"]:
                    self._create_conflict(d)
                else:  # an earlier create for this id arrived late: it wins
                    self.issue("conflict", f"messages/{old_author}.jsonl", old_eid,
                               f"message.create reuses message id {mid}")
                    self.r.conflicts += 1
                    self.c.execute("INSERT OR IGNORE INTO applied_events(event_id) VALUES (?)", (old_eid,))
                    for table in ("messages", "message_scopes", "message_refs", "message_edits"):
                        self.c.execute(f"DELETE FROM {table} WHERE message_id=?", (mid,))
                    row, s_rows, r_rows = self._message_rows([d])
                    self.c.executemany(
                        "INSERT INTO messages(message_id, agent_id, session_id, created_at, body_format, "
                        "body_content, body_structured, thread_id, priority, authored_by, disclosed, event_id, "
                        "created_key, updated_key, sig_id, deleted, edit_count) "
                        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0,0)", row)
                    scopes += s_rows
                    refs += r_rows
                    pending.add(mid)
        for d in later:  # losers of a conflict inside this batch
            if self._applied(d["event_id"]):
                self.r.duplicates += 1
            else:
                applied.add(d["event_id"])
                self._create_conflict(d)
        if scopes:
            self.c.executemany("INSERT OR IGNORE INTO message_scopes VALUES (?,?,?)", scopes)
        if refs:
            self.c.executemany("INSERT OR IGNORE INTO message_refs VALUES (?,?,?)", refs)
        # Edits or deletes that arrived before their message (pending_targets) take effect now.
        if self.c.execute("SELECT 1 FROM pending_targets LIMIT 1").fetchone() is not None:
            for chunk in chunks(list(first)):
                found = [r[0] for r in self.c.execute(
                    f"SELECT message_id FROM pending_targets WHERE message_id IN ({qmarks(len(chunk))})", chunk)]
                pending.update(found)
                self.c.executemany("DELETE FROM pending_targets WHERE message_id = ?", [(m,) for m in found])
        for mid in sorted(pending):
            self.recompute(mid)
        return applied

    def _message_rows(self, creates: list[dict]) -> tuple[list, list, list]:
        rows, scopes, refs = [], [], []
        sig_of = self.sig_id
        for d in creates:
            mid = d["message_id"]
            body = d["body"]
            ts = d["timestamp"]
            key = time_key(ts)
            mentions = {r["value"] for r in d["refs"] if r["type"] == "mention"}
            if mentions:
                sig = sig_of(tuple(sorted({m[1:] if m[:1] == "@" else m for m in mentions} - {""})))
            else:
                sig = sig_of(())
            rows.append((mid, d["agent_id"], d["session_id"], ts, body["format"],
                         body["content"], body["structured"], d["thread_id"], d["priority"],
                         d["authored_by"], 1 if d["disclosed"] else 0, d["event_id"], key, key, sig))
            for s in d["scopes"]:
                scopes.append((mid, s["type"], s["value"]))
            for ref in d["refs"]:
                refs.append((mid, ref["type"], ref["value"]))
        return rows, scopes, refs

    def _clashing(self, first: dict[str, dict], max_rowid: int) -> dict[str, tuple[str, str]]:
        """Ids of ``first`` that were already in messages (rows up to ``max_rowid``): id -> (event_id, author)."""
        out = {}
        mids = list(first)
        for chunk in chunks(mids):
            for mid, eid, author in self.c.execute(
                    f"SELECT message_id, event_id, agent_id FROM messages WHERE rowid <= ? AND message_id IN "
                    f"({qmarks(len(chunk))})", [max_rowid] + chunk):
                out[mid] = (eid, author)
        return out

    def _applied(self, event_id: str) -> bool:
        return self.c.execute("SELECT 1 FROM applied_events WHERE event_id = ?", (event_id,)).fetchone() is not None

    def _create_conflict(self, d):
        self.r.conflicts += 1
        self.c.execute("INSERT OR IGNORE INTO applied_events(event_id) VALUES (?)", (d["event_id"],))
        self.issue("conflict", f"messages/{d['agent_id']}.jsonl", d["event_id"],
                   f"message.create reuses message id {d['message_id']}")

    def message_edit(self, batch):
        self.c.executemany(
            "INSERT OR IGNORE INTO edit_events(event_id, message_id, agent_id, session_id, timestamp, "
            "body_format, body_content, body_structured) VALUES (?,?,?,?,?,?,?,?)",
            [(d["event_id"], d["message_id"], d["agent_id"], d["session_id"], d["timestamp"],
              d["body"]["format"], d["body"]["content"], d["body"]["structured"]) for d in batch])
        self._recompute_existing({d["message_id"] for d in batch})

    def message_delete(self, batch):
        self.c.executemany(
            "INSERT OR IGNORE INTO delete_events(event_id, message_id, agent_id, timestamp, reason) "
            "VALUES (?,?,?,?,?)",
            [(d["event_id"], d["message_id"], d["agent_id"], d["timestamp"], d["reason"]) for d in batch])
        self._recompute_existing({d["message_id"] for d in batch})

    def _recompute_existing(self, mids: set[str]):
        mids = sorted(mids)
        present = set()
        for chunk in chunks(mids):
            present.update(r[0] for r in self.c.execute(
                f"SELECT message_id FROM messages WHERE message_id IN ({qmarks(len(chunk))})", chunk))
        for mid in mids:
            if mid in present:
                self.recompute(mid)
        missing = [(m,) for m in mids if m not in present]
        if missing:  # recomputed when the message arrives (message_create)
            self.c.executemany("INSERT OR IGNORE INTO pending_targets(message_id) VALUES (?)", missing)

    def recompute(self, mid: str) -> None:
        """Derive a message's current body, edit history and delete state from its events."""
        row = self.c.execute(
            "SELECT agent_id, body_format, body_content, body_structured, edit_count, created_key "
            "FROM messages WHERE message_id=?", (mid,)).fetchone()
        if row is None:
            return
        author, fmt, content, structured, edit_count, created_key = row
        if edit_count:
            first = self.c.execute(
                "SELECT old_format, old_content, old_structured FROM message_edits "
                "WHERE message_id=? ORDER BY event_id, id LIMIT 1", (mid,)).fetchone()
            if first is not None:
                fmt, content, structured = first
        deleted = None
        for eid, ts, reason, agent in self.c.execute(
                "SELECT event_id, timestamp, reason, agent_id FROM delete_events WHERE message_id=? "
                "ORDER BY event_id", (mid,)).fetchall():
            if agent != author:
                if self.issue("forged", f"messages/{agent}.jsonl", eid,
                              f"{agent} may not delete {mid} (author {author})"):
                    self.r.forged += 1
            elif deleted is None:
                deleted = (eid, ts, reason)
        edits = []
        for e in self.c.execute(
                "SELECT event_id, agent_id, session_id, timestamp, body_format, body_content, body_structured "
                "FROM edit_events WHERE message_id=? ORDER BY event_id", (mid,)).fetchall():
            if e[1] != author:
                if self.issue("forged", f"messages/{e[1]}.jsonl", e[0],
                              f"{e[1]} may not edit {mid} (author {author})"):
                    self.r.forged += 1
            elif deleted is None or e[0] < deleted[0]:
                edits.append(e)
        self.c.execute("DELETE FROM message_edits WHERE message_id=?", (mid,))
        cur = (fmt, content, structured)
        updated_at = None
        for eid, agent, sid, ts, nfmt, ncontent, nstructured in edits:
            self.c.execute(
                "INSERT INTO message_edits(message_id, edited_at, edited_by, old_content, new_content, "
                "old_structured, new_structured, old_format, new_format, session_id, event_id) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (mid, ts, agent, cur[1], ncontent, cur[2], nstructured, cur[0], nfmt, sid, eid))
            cur = (nfmt, ncontent, nstructured)
            updated_at = ts
        self.c.execute(
            "UPDATE messages SET body_format=?, body_content=?, body_structured=?, updated_at=?, "
            "updated_key=?, edit_count=?, deleted=?, deleted_at=?, delete_reason=? WHERE message_id=?",
            (cur[0], cur[1], cur[2], updated_at, time_key(updated_at) if updated_at else created_key,
             len(edits), 1 if deleted else 0,
             deleted[1] if deleted else None, deleted[2] if deleted else None, mid))

    # ---------------------------------------------------------------- receipts
    def receipt(self, batch):
        # Last writer wins per (message, agent) and the first archive stays: both
        # are decided by the upserts' WHERE clauses, so rows can go in as they come.
        states, archives = [], []
        for d in batch:
            agent, ts, eid = d["agent_id"], d["timestamp"], d["event_id"]
            if d["type"] == "message.archive":
                archives += [(mid, agent, eid, ts) for mid in d["message_ids"]]
            else:
                is_read, sid = (1 if d["type"] == "message.read" else 0), d["session_id"]
                states += [(mid, agent, is_read, eid, ts, sid) for mid in d["message_ids"]]
        if states:
            self.c.executemany(
                "INSERT INTO read_state(message_id, agent_id, is_read, event_id, at, session_id) "
                "VALUES (?,?,?,?,?,?) ON CONFLICT(message_id, agent_id) DO UPDATE SET is_read=excluded.is_read, "
                "event_id=excluded.event_id, at=excluded.at, session_id=excluded.session_id "
                "WHERE excluded.event_id > read_state.event_id", states)
        if archives:
            self.c.executemany(
                "INSERT INTO archive_marks(message_id, agent_id, event_id, archived_at) VALUES (?,?,?,?) "
                "ON CONFLICT(message_id, agent_id) DO UPDATE SET event_id=excluded.event_id, "
                "archived_at=excluded.archived_at WHERE excluded.event_id < archive_marks.event_id", archives)


_ORDER = [
    ("agent.register", _Folder.agent_register),
    ("agent.cleanup", _Folder.agent_cleanup),
    ("agent.session.start", _Folder.session_start),
    ("agent.session.end", _Folder.session_end),
    ("group.create", _Folder.group_create),
    ("group.delete", _Folder.group_delete),
    ("group.member.add", _Folder.group_member),
    ("group.member.remove", _Folder.group_member),
    ("thread.create", _Folder.thread_create),
    ("message.create", _Folder.message_create),
    ("message.edit", _Folder.message_edit),
    ("message.delete", _Folder.message_delete),
    ("message.read", _Folder.receipt),
    ("message.unread", _Folder.receipt),
    ("message.archive", _Folder.receipt),
    ("agent.update", _Folder.agent_update),
]
assert {t for t, _ in _ORDER} == set(ev.EVENT_TYPES)


# -------------------------------------------------------------------- public API

def fold(db: pw.SqliteDatabase, records: Iterable[tuple[str, dict]], *,
         issues: Iterable[LogIssue] = (), positions: dict[str, Position] | None = None,
         keep_applied: bool = True) -> FoldResult:
    """Apply (shard, event) records in one transaction; optionally record malformed
    lines and store new read positions in the same transaction.

    ``keep_applied=False`` leaves `FoldResult.applied` empty (bulk loads).
    """
    records = records if isinstance(records, list) else list(records)
    result = FoldResult()
    now = ev.now_rfc3339()
    with db.atomic():
        conn = db.connection()
        folder = _Folder(conn, result, now)
        folder.keep_applied = keep_applied
        try:
            _in_savepoint(conn, folder.fold, records)
        except _CONTENT_ERRORS as exc:
            # Some event made a handler fail. The log is untrusted input: find the
            # event(s) by folding one at a time, record them, and fold the rest.
            log.warning("a fold batch of %d events failed (%s: %s); folding them one by one",
                        len(records), type(exc).__name__, exc)
            result = folder.r = FoldResult()
            folder.sigs.clear()  # ids cached during the undone attempt may not exist any more
            for shard, d in records:
                try:
                    _in_savepoint(conn, folder.fold, [(shard, d)])
                except _CONTENT_ERRORS as one:
                    folder.sigs.clear()
                    result.invalid += 1
                    eid = d.get("event_id") if isinstance(d, dict) else None
                    folder.issue("invalid", shard, str(eid or "?")[:64],
                                 f"cannot apply this event ({type(one).__name__}: {str(one)[:200]})")
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
_CONTENT_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError,
                   RecursionError, sqlite3.IntegrityError, sqlite3.InterfaceError, sqlite3.DataError)


def _in_savepoint(conn, fn, *args) -> None:
    """Run ``fn(*args)`` so that its writes are undone if it raises."""
    conn.execute("SAVEPOINT thrum_fold")
    try:
        fn(*args)
    except BaseException:
        conn.execute("ROLLBACK TO thrum_fold")
        conn.execute("RELEASE thrum_fold")
        raise
    conn.execute("RELEASE thrum_fold")


def load_positions(db: pw.SqliteDatabase) -> dict[str, Position]:
    return {shard: Position(offset, tail) for shard, offset, tail in
            db.execute_sql("SELECT shard, offset, tail FROM log_positions").fetchall()}


def save_positions(db: pw.SqliteDatabase, positions: dict[str, Position]) -> None:
    db.connection().executemany(
        "INSERT INTO log_positions(shard, offset, tail) VALUES (?,?,?) ON CONFLICT(shard) DO UPDATE "
        "SET offset=excluded.offset, tail=excluded.tail",
        [(s, p.offset, p.tail) for s, p in positions.items()])


def catch_up(db: pw.SqliteDatabase, event_log: EventLog) -> FoldResult:
    """Fold whatever the log holds beyond the stored positions (all of it for a new db).

    Shards are read in chunks of about READ_CHUNK bytes and folded in batches of
    about REBUILD_BATCH events, each in one transaction together with the new
    positions of what it covers, so an interrupted catch-up resumes where it stopped.
    """
    return _fold_log(db, event_log, load_positions(db))


def _fold_log(db, event_log: EventLog, positions: dict[str, Position], *,
              keep_applied: bool = True) -> FoldResult:
    total = FoldResult()
    pending = ReadResult()

    def flush():
        nonlocal pending
        if pending.records or pending.issues or pending.positions:
            total.merge(fold(db, pending.records, issues=pending.issues, positions=pending.positions,
                             keep_applied=keep_applied))
        pending = ReadResult()

    for shard in event_log.shards():
        pos = positions.get(shard, Position())
        while True:
            before = len(pending.records)
            at_end = event_log.read_shard(shard, pos, pending, max_bytes=READ_CHUNK)
            new_pos = pending.positions.get(shard, pos)
            if len(pending.records) >= REBUILD_BATCH:
                flush()
            if at_end or (new_pos == pos and len(pending.records) == before):
                break
            pos = new_pos
    flush()
    return total


def rebuild(db: pw.SqliteDatabase, event_log: EventLog, *, keep_applied: bool = False) -> FoldResult:
    """Drop and recreate every table, then fold the whole log.

    Loads without query indexes and counter triggers, then builds both once
    (`models.finish_schema`), which is much faster than maintaining them row by
    row. The schema version is written last: an interrupted rebuild leaves a
    database without one, which the daemon rebuilds again. The ``kv`` table
    (daemon state that is not in the log) is kept. ``keep_applied``: return the
    applied events in the result (memory grows with the log).
    """
    kv = _saved_kv(db)
    models.drop_schema(db)
    models.create_tables(db)
    saved = {p: db.execute_sql(f"PRAGMA {p}").fetchone()[0] for p in ("synchronous", "cache_size", "journal_mode")}
    # The log is the durable copy and an interrupted rebuild is redone (no schema
    # version), so the load needs neither syncs nor a journal; it does need cache.
    db.execute_sql("PRAGMA synchronous=OFF")
    db.execute_sql(f"PRAGMA cache_size={REBUILD_CACHE_KIB}")
    db.execute_sql("PRAGMA journal_mode=OFF")  # stays as it is if another connection is open
    db.execute_sql("PRAGMA threads=2")  # index builds may sort on a second core
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived dicts: the cycle collector would rescan them all, repeatedly
    try:
        started = time.perf_counter()
        total = _fold_log(db, event_log, {}, keep_applied=keep_applied)
        loaded = time.perf_counter()
        models.finish_schema(db, compute_counters=True)
        total.timings = {"load": loaded - started, "indexes_and_counters": time.perf_counter() - loaded}
        if kv:
            with db.atomic():
                db.connection().executemany("INSERT OR REPLACE INTO kv(key, value) VALUES (?,?)", kv)
    finally:
        if gc_was_enabled:
            gc.enable()
        db.execute_sql("PRAGMA threads=0")
        db.execute_sql(f"PRAGMA journal_mode={saved['journal_mode']}")
        db.execute_sql(f"PRAGMA cache_size={int(saved['cache_size'])}")
        db.execute_sql(f"PRAGMA synchronous={int(saved['synchronous'])}")
    return total


def _saved_kv(db) -> list[tuple[str, str]]:
    try:
        return db.execute_sql("SELECT key, value FROM kv").fetchall()
    except pw.DatabaseError:
        return []


def verify_counters(db: pw.SqliteDatabase) -> list[str]:
    """Compare the trigger-kept counter tables with sums computed from scratch.

    Returns a description of every difference (empty when consistent); for tests
    and `thrum doctor`-style checks.
    """
    problems = []
    specs = {
        "sig_totals": ("SELECT sig_id, n FROM sig_totals WHERE n != 0", 1),
        "sig_author_totals": ("SELECT author, sig_id, n FROM sig_author_totals WHERE n != 0", 2),
        "agent_sig_counts": ("SELECT agent_id, sig_id, own, n_read, n_arch, n_read_arch FROM agent_sig_counts "
                             "WHERE n_read != 0 OR n_arch != 0 OR n_read_arch != 0", 3),
    }
    for table, (sql, nkey) in specs.items():
        kept = {tuple(r[:nkey]): tuple(r[nkey:]) for r in db.execute_sql(sql).fetchall()}
        fresh = {tuple(r[:nkey]): tuple(r[nkey:]) for r in db.execute_sql(models.COUNTER_QUERIES[table]).fetchall()
                 if any(r[nkey:])}
        for key in sorted(set(kept) | set(fresh), key=repr):
            if kept.get(key) != fresh.get(key):
                problems.append(f"{table}{key}: kept {kept.get(key)} computed {fresh.get(key)}")
    return problems


def fold_counts(db: pw.SqliteDatabase) -> dict[str, int]:
    """How many lines/events the fold refused so far, by kind (for `sync status`)."""
    return dict(db.execute_sql("SELECT kind, count(*) FROM fold_issues GROUP BY kind").fetchall())


def open_projection(path: str | os.PathLike, event_log: EventLog) -> pw.SqliteDatabase:
    """Open the database, rebuilding it from the log when missing, corrupt or outdated.

    No whole-file integrity scan at start-up (it would cost seconds on a large
    projection): a database SQLite cannot read, or whose catch-up fails, is
    thrown away and rebuilt from the log, which is always the truth.
    """
    db = None
    try:
        db = models.open_database(path)
        version = models.schema_version(db)
        if version == models.SCHEMA_VERSION:
            catch_up(db, event_log)
            return db
        if version is not None:
            log.info("projection schema %s != %s: rebuilding", version, models.SCHEMA_VERSION)
        rebuild(db, event_log)
        return db
    except Exception as exc:  # not a database, corrupt pages, a rebuild that hit either
        log.warning("projection database unusable (%s): rebuilding from the log", exc)
    if db is not None:
        try:
            db.close()
        except Exception:
            pass
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            pass
    db = models.open_database(path)
    rebuild(db, event_log)
    return db
