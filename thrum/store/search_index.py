"""The search index: an FTS5 table over what each live message says, kept by triggers like the counters.

What a message's entry holds (the view `DOCS_VIEW`, one row per live message):
its current body (after edits), its subject, its author's name and role, the
values of its scopes and refs, its thread's subject (the first subject in the
thread, as ``thread list`` shows it) and the parts of its CamelCase words
(`thrum.store.search_text`). Deleted messages have none. The tokenizer and its
reason: docs/design/decisions.md ("Search").

Rules:

1. The index holds exactly the rows of the view, with the view's current values.
   It is an external-content FTS5 table (it stores no second copy of the text);
   removing an entry means handing FTS5 the values it was built from, so every
   change to what the view shows goes through `TRIGGERS`: an entry is removed
   *before* its values change and added back after, in the same transaction as
   the change. That covers the fold's edits and deletes, an author whose role
   changes and a thread whose subject changes, whatever code path makes them.
2. A rebuild loads without the triggers and builds the index once at the end (`fill`:
   set-wise passes, much faster than a million single inserts; a large history's on a
   second thread, then copied in: `search_beside`), as one segment on the top of FTS5's
   levels, so later commits never merge the whole index again (`_fill_on_top`); the
   triggers are created after it, like the counters'.
3. `check` compares the index with the messages table (`thrum doctor`); an index
   SQLite reports as corrupt is rebuilt with the projection (daemon/view.py),
   one that merely disagrees is rebuilt by `rebuild_index`.
4. A large insert (a sync's thousands of messages) drops the two insert triggers
   for its duration and adds the entries set-wise after the rows (`bulk_insert`).
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import contextmanager
from typing import Iterator

import peewee as pw

from .sql import scalar

TABLE = "message_search"
COLUMNS = ("body", "subject", "author", "tags", "thread", "parts")
WEIGHTS = (1.0, 3.0, 1.5, 2.0, 1.5, 0.7)  # bm25 weight of a hit in each column, in COLUMNS order
TOKENIZE = "unicode61 remove_diacritics 2"
BULK_HASH_BYTES = 64 * 2**20  # FTS5's in-memory term buffer while `build` runs (default 1 MiB)
DEFAULT_HASH_BYTES = 2**20


def _author(agent: str, role: str) -> str:
    """The author column: the name, then the role (the one formula, for the view and the triggers)."""
    return f"{agent} || ' ' || coalesce({role}, '')"


def _row_values(r: str) -> dict[str, str]:
    """Each column's value for the messages row ``r`` (``m`` in the view, ``NEW`` in a trigger)."""
    return {
        "body": f"{r}.body_content",
        "subject": f"{r}.subject",
        "author": _author(f"{r}.agent_id", f"(SELECT a.role FROM agents a WHERE a.agent_id = {r}.agent_id)"),
        "tags": f"{r}.search_tags",
        "thread": f"CASE WHEN {r}.thread_id = '' THEN '' ELSE coalesce((SELECT t.subject FROM thread_subjects t "
        f"WHERE t.thread_id = {r}.thread_id), '') END",
        "parts": f"{r}.search_parts",
    }


_M = _row_values("m")
DOCS_VIEW = (
    "CREATE VIEW IF NOT EXISTS message_search_docs AS SELECT m.rowid AS rid, m.agent_id, m.thread_id, "
    "(SELECT a.role FROM agents a WHERE a.agent_id = m.agent_id) AS role, "
    + ", ".join(f"{expr} AS {col}" for col, expr in _M.items())
    + " FROM messages m WHERE m.deleted = 0"
)
# The index reads its content from this view (by rid)
CONTENT_VIEW = (
    "CREATE VIEW IF NOT EXISTS message_search_content AS SELECT d.rid, "
    + ", ".join(f"d.{c}" for c in COLUMNS)
    + " FROM message_search_docs d"
)
VIEWS = [DOCS_VIEW, CONTENT_VIEW]


def _create_table(name: str) -> str:
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5({', '.join(COLUMNS)}, "
        f"content='message_search_content', content_rowid='rid', tokenize='{TOKENIZE}')"
    )


CREATE_TABLE = _create_table(TABLE)
SHADOW_TABLES = tuple(f"{TABLE}_{part}" for part in ("data", "idx", "docsize", "config"))  # what FTS5 keeps

_COLS = ", ".join(COLUMNS)


def _values(*, author: str = "d.author", thread: str = "d.thread") -> str:
    """The entry's values from a row ``d`` of the docs view (``author``/``thread``: another expression)."""
    given = {"author": author, "thread": thread}
    return ", ".join(given.get(c, f"d.{c}") for c in COLUMNS)


def _remove(where: str, **old: str) -> str:
    """Remove the entries of the docs view's rows matching ``where``, with the values they were
    indexed with (``old``: the expression of what is about to change, else its current value)."""
    return (
        f"INSERT INTO {TABLE}({TABLE}, rowid, {_COLS}) SELECT 'delete', d.rid, {_values(**old)} "
        f"FROM message_search_docs d WHERE {where};"
    )


def _add(where: str) -> str:
    return f"INSERT INTO {TABLE}(rowid, {_COLS}) SELECT d.rid, {_values()} FROM message_search_docs d WHERE {where};"


def _add_new() -> str:
    """Add the entry of the row a trigger inserted or updated (``NEW``), straight from its values:
    what the view would give for it (`_row_values`), without a second lookup of the row."""
    values = _row_values("NEW")
    return (
        f"INSERT INTO {TABLE}(rowid, {_COLS}) SELECT NEW.rowid, {', '.join(values[c] for c in COLUMNS)} "
        "WHERE NEW.deleted = 0;"
    )


def _thread_subject(thread: str, when: str) -> str:
    """Set ``thread_subjects`` for one thread, when ``when`` holds: the subject of its first
    live message that has one (none: no row)."""
    first = (
        f"SELECT subject FROM messages WHERE thread_id = {thread} AND thread_id <> '' AND deleted = 0 "
        "AND subject <> '' ORDER BY created_key, message_id LIMIT 1"
    )
    return (
        f"DELETE FROM thread_subjects WHERE {when} AND thread_id = {thread} AND NOT EXISTS ({first});"
        f" INSERT INTO thread_subjects(thread_id, subject) SELECT {thread}, ({first}) WHERE {when} AND EXISTS ({first})"
        " ON CONFLICT(thread_id) DO UPDATE SET subject = excluded.subject"
        " WHERE thread_subjects.subject IS NOT excluded.subject;"
    )


_THREAD_SUBJECT_BY_PARAM = [st.strip() + ";" for st in _thread_subject(":t", "1").split(";") if st.strip()]

_CHANGED = " OR ".join(
    f"OLD.{c} IS NOT NEW.{c}"
    for c in ("deleted", "body_content", "subject", "agent_id", "thread_id", "search_tags", "search_parts")
)
_HAS_SUBJECT = "{r}.thread_id <> '' AND {r}.subject <> ''"
_MOVED = "OLD.thread_id IS NOT NEW.thread_id OR OLD.subject IS NOT NEW.subject"
_NEW_SUBJECT = _HAS_SUBJECT.format(r="NEW") + " AND NEW.deleted = 0"


def _in_thread(thread: str) -> str:
    return f"d.thread_id = {thread} AND d.thread_id <> ''"


# Statements of one trigger run in order: a message's entry is written before its thread's
# subject is set, so when that changes, the thread's re-index (trg_search_threads_*) finds
# every entry of the thread, this message's included, as it was indexed.
TRIGGERS = [
    # (two triggers for one insert, whose WHENs exclude each other: a message with a subject in a
    # thread also sets the thread's subject; the common one pays for nothing more)
    f"CREATE TRIGGER IF NOT EXISTS trg_search_messages_ins AFTER INSERT ON messages WHEN NOT ({_NEW_SUBJECT}) BEGIN "
    + _add_new()
    + " END",
    f"CREATE TRIGGER IF NOT EXISTS trg_search_messages_ins_subject AFTER INSERT ON messages WHEN {_NEW_SUBJECT} BEGIN "
    + _add_new()
    + " "
    + _thread_subject("NEW.thread_id", "1")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_search_messages_del BEFORE DELETE ON messages WHEN OLD.deleted = 0 BEGIN "
    + _remove("d.rid = OLD.rowid")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_search_messages_del_thread AFTER DELETE ON messages "
    f"WHEN {_HAS_SUBJECT.format(r='OLD')} BEGIN " + _thread_subject("OLD.thread_id", "1") + " END",
    f"CREATE TRIGGER IF NOT EXISTS trg_search_messages_upd_before BEFORE UPDATE ON messages WHEN {_CHANGED} BEGIN "
    + _remove("d.rid = OLD.rowid")
    + " END",
    f"CREATE TRIGGER IF NOT EXISTS trg_search_messages_upd_after AFTER UPDATE ON messages WHEN {_CHANGED} BEGIN "
    + _add_new()
    + " "
    + _thread_subject(
        "OLD.thread_id", _HAS_SUBJECT.format(r="OLD") + f" AND ({_MOVED} OR OLD.deleted IS NOT NEW.deleted)"
    )
    + " "
    + _thread_subject("NEW.thread_id", _HAS_SUBJECT.format(r="NEW") + " AND OLD.thread_id IS NOT NEW.thread_id")
    + " END",
    # an author's role: each of their entries names it
    "CREATE TRIGGER IF NOT EXISTS trg_search_agents_ins AFTER INSERT ON agents "
    "WHEN coalesce(NEW.role, '') <> '' BEGIN "
    + _remove("d.agent_id = NEW.agent_id", author=_author("d.agent_id", "NULL"))
    + " "
    + _add("d.agent_id = NEW.agent_id")
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_search_agents_upd AFTER UPDATE OF role ON agents "
    "WHEN coalesce(OLD.role, '') IS NOT coalesce(NEW.role, '') BEGIN "
    + _remove("d.agent_id = NEW.agent_id", author=_author("d.agent_id", "OLD.role"))
    + " "
    + _add("d.agent_id = NEW.agent_id")
    + " END",
    # a thread's subject: each entry in the thread names it
    "CREATE TRIGGER IF NOT EXISTS trg_search_threads_ins AFTER INSERT ON thread_subjects BEGIN "
    + _remove(_in_thread("NEW.thread_id"), thread="''")
    + " "
    + _add(_in_thread("NEW.thread_id"))
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_search_threads_upd AFTER UPDATE OF subject ON thread_subjects BEGIN "
    + _remove(_in_thread("NEW.thread_id"), thread="OLD.subject")
    + " "
    + _add(_in_thread("NEW.thread_id"))
    + " END",
    "CREATE TRIGGER IF NOT EXISTS trg_search_threads_del AFTER DELETE ON thread_subjects BEGIN "
    + _remove(_in_thread("OLD.thread_id"), thread="OLD.subject")
    + " "
    + _add(_in_thread("OLD.thread_id"))
    + " END",
]

TRIGGER_NAMES = [re.match(r"CREATE TRIGGER IF NOT EXISTS (\w+)", t).group(1) for t in TRIGGERS]  # type: ignore[union-attr]
TRIGGER_SQL = dict(zip(TRIGGER_NAMES, TRIGGERS))

_INSERT_TRIGGERS = ("trg_search_messages_ins", "trg_search_messages_ins_subject")
# The threads of the rows a bulk insert added that have a subject. NOT INDEXED keeps SQLite
# to the rowid range: it chose the partial index on thread_id instead, a scan of every
# message with a thread (at a million messages ~55 ms per received chunk, ~1/5 of the fold).
NEW_THREADS_WITH_SUBJECTS = (
    "SELECT DISTINCT thread_id FROM messages NOT INDEXED WHERE rowid > ? AND thread_id <> '' AND subject <> '' "
    "AND deleted = 0"
)


@contextmanager
def bulk_insert(conn: sqlite3.Connection, after_rowid: int) -> Iterator[None]:
    """Insert many messages without the per-row insert triggers, then index them set-wise
    (the rows with a rowid above ``after_rowid``) and set their threads' subjects.

    A trigger firing costs more than the entry it adds (measured: 10,000 received
    messages indexed in 0.6 s by the triggers), so, as `counters.bulk_message_insert`
    does for the counters, the triggers are dropped and created again inside the
    caller's transaction (no other connection ever sees the table without them).
    Only around plain inserts into ``messages``; without the triggers (a rebuild's
    load) it does nothing.
    """
    if (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?", (_INSERT_TRIGGERS[0],)
        ).fetchone()
        is None
    ):
        yield
        return
    for name in _INSERT_TRIGGERS:
        conn.execute(f"DROP TRIGGER {name}")
    try:
        yield
        conn.execute(
            f"INSERT INTO {TABLE}(rowid, {_COLS}) SELECT d.rid, {_values()} FROM message_search_docs d WHERE d.rid > ?",
            (after_rowid,),
        )
        threads = [r[0] for r in conn.execute(NEW_THREADS_WITH_SUBJECTS, (after_rowid,))]
        for thread in threads:  # (their entries are in: the subject's own triggers re-index the thread)
            for statement in _THREAD_SUBJECT_BY_PARAM:
                conn.execute(statement, {"t": thread})
    finally:
        for name in _INSERT_TRIGGERS:
            conn.execute(TRIGGER_SQL[name])


THREAD_SUBJECTS_FROM_MESSAGES = (
    "INSERT INTO thread_subjects(thread_id, subject) SELECT thread_id, subject FROM (SELECT thread_id, subject, "
    "row_number() OVER (PARTITION BY thread_id ORDER BY created_key, message_id) AS n FROM messages "
    "WHERE thread_id <> '' AND deleted = 0 AND subject <> '') WHERE n = 1"
)


def build(db: pw.SqliteDatabase) -> None:
    """Create the index (if missing) and fill it from the messages (`_fill_on_top`), then its triggers.

    For a rebuild, after the rows are loaded (no triggers during the load, rule 2);
    on a new, empty database it costs nothing. One transaction.
    """
    with db.atomic():
        prepare(db)
        fill(db.connection(), TABLE)
        for sql in TRIGGERS:
            db.execute_sql(sql)


def prepare(db: pw.SqliteDatabase) -> None:
    """What the index is filled from: every thread's subject (`thread_subjects`) and the views."""
    with db.atomic():
        db.execute_sql("DELETE FROM thread_subjects")
        if db.execute_sql("SELECT 1 FROM messages WHERE subject <> '' LIMIT 1").fetchone() is not None:
            db.execute_sql(THREAD_SUBJECTS_FROM_MESSAGES)
        for sql in VIEWS:
            db.execute_sql(sql)


def fill(conn: sqlite3.Connection, table: str) -> None:
    """Create the index as ``table`` (``TABLE``, or it in an attached database: `search_beside`)
    and fill it from the main database's messages (`_fill_on_top`, with a large term buffer).
    In the caller's transaction; no triggers."""
    conn.execute(_create_table(table))
    conn.execute(f"INSERT INTO {table}({TABLE}, rank) VALUES ('hashsize', ?)", (BULK_HASH_BYTES,))
    _fill_on_top(conn, table)
    conn.execute(f"INSERT INTO {table}({TABLE}, rank) VALUES ('hashsize', ?)", (DEFAULT_HASH_BYTES,))


def _fill_on_top(conn: sqlite3.Connection, table: str) -> None:
    """Fill the (new) index with every live message so that it ends as one segment on the
    top of FTS5's levels, where the small segments that later commits add do not reach it.

    Why: FTS5 writes a new segment on level 0 at every commit that changes the index (a
    send: a segment of one page) and merges a level into the next once it holds
    `automerge` (4) segments: level k is merged every ~4^(k+1) commits, however much it
    holds. FTS5's own 'rebuild' leaves the whole index on level 0, so the 4th, 16th, 64th,
    256th... commit after a rebuild rewrote all of it (at a million messages ~1 s of CPU
    each: a send's fold averaged 3.7-10 ms over the next 300 sends instead of 0.3).

    How, with FTS5's own commands: an 'optimize' merges every segment onto a new level
    above the highest one, and a segment written later on level 0 leaves the ones above
    in place as long as it is smaller than they are (a larger one pulls them down to its
    level). So: a sample of the messages (every `TOP_SAMPLE`-th) goes in first, in rounds
    that each add half as much as is in and 'optimize' (two levels up a round, the top
    rewritten each time: ~3 times the sample's size in all); then the rest in
    `LOAD_PIECES` segments, each a third of the sample, with FTS5's own merging off
    meanwhile; then one 'optimize' merges it all onto the top: one more write of the
    index than 'rebuild' (~1 s at a million). A small index is filled in one statement
    (its merges cost little). Figures: docs/design/decisions.md ("The fold on a large history").
    """
    conn.execute(f"INSERT INTO {table}({TABLE}) VALUES ('delete-all')")
    last = conn.execute("SELECT coalesce(max(rowid), 0) FROM main.messages").fetchone()[0]
    add_docs, add_sample = _add_docs(table), _add_sample(table)
    if last < TOP_MIN_MESSAGES:
        conn.execute(f"{add_docs} WHERE 1")
        return
    _config(conn, table, automerge=0, crisismerge=FTS5_MAX_CRISISMERGE)
    # the sample: rows TOP_SAMPLE, 2 * TOP_SAMPLE, ... (looked up by rowid, no scan)
    every = TOP_SAMPLE
    positions = last // every
    done = min(TOP_FIRST, positions)
    conn.execute(add_sample, {"first": every, "step": every, "last": every * done})
    while done < positions:
        more = min(positions, done + max(1, done // 2))
        conn.execute(add_sample, {"first": every * (done + 1), "step": every, "last": every * more})
        conn.execute(f"INSERT INTO {table}({TABLE}) VALUES ('optimize')")
        done = more
    step = last // LOAD_PIECES + 1
    for low in range(0, last, step):
        conn.execute("SAVEPOINT thrum_index_piece")  # FTS5 writes what it holds as a segment at a savepoint
        conn.execute(f"{add_docs} WHERE d.rid % ? <> 0 AND d.rid > ? AND d.rid <= ?", (every, low, low + step))
        conn.execute("RELEASE thrum_index_piece")
    conn.execute(f"INSERT INTO {table}({TABLE}) VALUES ('optimize')")
    _config(conn, table, automerge=DEFAULT_AUTOMERGE, crisismerge=DEFAULT_CRISISMERGE)


def _config(conn: sqlite3.Connection, table: str, **values: int) -> None:
    for name, value in values.items():
        conn.execute(f"INSERT INTO {table}({TABLE}, rank) VALUES (?, ?)", (name, value))


TOP_MIN_MESSAGES = 20_000  # fewer messages (by rowid): the index is filled in one statement
TOP_SAMPLE = 32  # every 32nd message makes the top segment (~3 % of the index)
TOP_FIRST = 32  # messages of the sample in its first segment (then x1.5 a round: ~17 rounds at a million)
LOAD_PIECES = 96  # the segments of the rest: each ~1 % of the index, a third of the sample
DEFAULT_AUTOMERGE = 4  # FTS5's defaults, put back after the load
DEFAULT_CRISISMERGE = 16
FTS5_MAX_CRISISMERGE = 1999


def _add_docs(table: str) -> str:
    return f"INSERT INTO {table}(rowid, {_COLS}) SELECT d.rid, {_values()} FROM main.message_search_docs d"


def _add_sample(table: str) -> str:
    """Rows first, first + step, ... up to last, looked up by rowid."""
    return (
        "WITH RECURSIVE s(r) AS (SELECT :first WHERE :first <= :last "
        "UNION ALL SELECT r + :step FROM s WHERE r + :step <= :last) "
        f"INSERT INTO {table}(rowid, {_COLS}) SELECT d.rid, {_values()} FROM s "
        "JOIN main.message_search_docs d ON d.rid = s.r"
    )


def rebuild_index(db: pw.SqliteDatabase) -> None:
    """Throw the index away and build it again from the messages (it disagreed with them)."""
    with db.atomic():
        for name in TRIGGER_NAMES:
            db.execute_sql(f"DROP TRIGGER IF EXISTS {name}")
        db.execute_sql(f"DROP TABLE IF EXISTS {TABLE}")
        db.execute_sql("DROP VIEW IF EXISTS message_search_content")
        db.execute_sql("DROP VIEW IF EXISTS message_search_docs")
        build(db)


SAMPLE = 500  # messages a quick check looks up by their own words
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")


def check(db: pw.SqliteDatabase, *, thorough: bool = False) -> str | None:
    """None when the index holds exactly the live messages, as they read now; else what is wrong.

    Always: an entry for every live message and no other (counts and a lookup per
    message: about a second at a million), then `SAMPLE` messages spread over the
    table found by the words they hold now (an entry built from older text is not).
    ``thorough``: FTS5 checks every entry against the text it was built from
    ('integrity-check', rank 1: the whole content tokenised again). That takes the
    database's write lock while it runs (seconds at a million messages), so the
    daemon runs only the quick check, from a reader, and tests the thorough one.
    """
    try:
        entries = scalar(db, f"SELECT count(*) FROM {TABLE}_docsize")
        live = scalar(db, "SELECT count(*) FROM messages WHERE deleted = 0")
        if entries != live:
            return f"the search index has {entries:,} entries for {live:,} live messages"
        missing = scalar(
            db,
            f"SELECT count(*) FROM messages m WHERE m.deleted = 0 AND NOT EXISTS "
            f"(SELECT 1 FROM {TABLE}_docsize s WHERE s.id = m.rowid)",
        )
        if missing:
            return f"{missing:,} live message(s) are missing from the search index"
        stale = _stale_sample(db, live)
        if stale:
            return f"{stale} of the messages sampled are not found by their current words in the search index"
        if thorough:
            db.execute_sql(f"INSERT INTO {TABLE}({TABLE}, rank) VALUES ('integrity-check', 1)")
    except (sqlite3.DatabaseError, pw.DatabaseError) as exc:
        return f"the search index does not match the messages ({exc})"
    return None


def _stale_sample(db: pw.SqliteDatabase, live: int) -> int:
    """How many of `SAMPLE` live messages (every n-th row) the index does not find by three of
    their current body's plain words."""
    step = max(1, live // SAMPLE)
    stale = 0
    for rowid, body in db.execute_sql(
        "SELECT rowid, body_content FROM messages WHERE deleted = 0 AND rowid % ? = 0 LIMIT ?", (step, SAMPLE)
    ).fetchall():
        words = list(dict.fromkeys(_ASCII_WORD.findall(body or "")))[:3]
        if not words:
            continue
        found = db.execute_sql(
            f"SELECT 1 FROM {TABLE} WHERE {TABLE} MATCH ? AND rowid = ?",
            (" AND ".join(f'"{w}"' for w in words), rowid),
        ).fetchone()
        stale += found is None
    return stale
