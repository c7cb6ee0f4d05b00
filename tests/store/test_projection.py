"""The fold, handler by handler: order, authorship, conflicts, idempotency, rebuild."""

from __future__ import annotations

import pytest

from thrum import events as ev
from thrum.errors import NotFound
from thrum.store import database, directory, projection, queries, rebuild
from thrum.store.log import EventLog
from thrum.store.verified import VerifiedFold
from thrum.trust.ring import KeyRing
from thrum.trust.verdicts import VerdictMemory
from thrum.trust.verify import Verifier

from store_helpers import Events, fold, ids, mid


@pytest.fixture
def e():
    return Events()


def message(db, message_id, viewer=None):
    return queries.get_message(db, message_id, viewer=viewer)["message"]


def issues(db, kind=None):
    sql = "SELECT kind, shard, event_id FROM fold_issues" + (" WHERE kind = ?" if kind else "") + " ORDER BY key"
    return db.execute_sql(sql, (kind,) if kind else ()).fetchall()


# --------------------------------------------------------------------------- messages


def test_fold_create_then_edit_updates_body_and_history(db, e):
    c = e.create("alice", "v1")
    fold(db, c)
    fold(db, e.edit("alice", mid(c), "v2"))
    m = message(db, mid(c))
    assert m["body"]["content"] == "v2"
    assert m["version"] == 1
    assert m["edited"]
    assert [(x["old_content"], x["new_content"]) for x in m["edits"]] == [("v1", "v2")]
    assert m["updated_at"] != ""


def test_fold_edit_before_create_takes_effect_when_the_message_arrives(db, e):
    c = e.create("alice", "v1")
    edit = e.edit("alice", mid(c), "v2")
    fold(db, edit)
    with pytest.raises(NotFound):
        message(db, mid(c))
    fold(db, c)
    m = message(db, mid(c))
    assert m["body"]["content"] == "v2"
    assert m["version"] == 1


def test_fold_concurrent_edits_last_writer_by_event_id_wins(db, e):
    c = e.create("alice", "v1")
    first, second = e.edit("alice", mid(c), "a"), e.edit("alice", mid(c), "b")
    fold(db, second, c)
    fold(db, first)
    m = message(db, mid(c))
    assert m["body"]["content"] == "b"
    assert [(x["old_content"], x["new_content"]) for x in m["edits"]] == [("v1", "a"), ("a", "b")]


def test_fold_delete_is_final_and_later_edits_are_ignored(db, e):
    c = e.create("alice", "v1")
    early = e.edit("alice", mid(c), "before delete")
    d = e.delete("alice", mid(c), reason="oops")
    late = e.edit("alice", mid(c), "after delete")
    fold(db, late, d)
    fold(db, c, early)
    m = message(db, mid(c))
    assert m["deleted"] is True
    assert m["metadata"]["delete_reason"] == "oops"
    assert m["metadata"]["deleted_at"]
    assert m["body"]["content"] == "before delete"
    assert m["version"] == 1
    assert ids(queries.list_messages(db)) == []
    assert ids(queries.list_messages(db, include_deleted=True)) == [mid(c)]


def test_fold_non_author_edit_and_delete_are_ignored_and_recorded_as_forged(db, e):
    c = e.create("alice", "mine")
    bad_edit = e.edit("mallory", mid(c), "pwned")
    bad_delete = e.delete("mallory", mid(c))
    r1 = fold(db, bad_edit, bad_delete)  # before the message exists: stored, not judged yet
    r2 = fold(db, c)
    r3 = fold(db, e.edit("alice", mid(c), "still mine"))  # recomputes; the forged ones are not counted again
    m = message(db, mid(c))
    assert m["body"]["content"] == "still mine"
    assert not m["deleted"]
    assert r1.forged + r2.forged + r3.forged == 2
    assert {(s, eid) for _, s, eid in issues(db, "forged")} == {
        ("messages/mallory", bad_edit[1]["event_id"]),
        ("messages/mallory", bad_delete[1]["event_id"]),
    }


@pytest.mark.parametrize(
    "wrong_shard", ["messages/bob/000001.jsonl", "receipts/alice/000001.jsonl", "events/000001.jsonl"]
)
def test_fold_event_in_the_wrong_shard_is_forged(db, e, wrong_shard):
    shard, d = e.create("alice", "hi")
    result = projection.fold(db, [(wrong_shard, d)])
    assert result.forged == 1
    assert result.applied == []
    assert ids(queries.list_messages(db)) == []
    assert issues(db, "forged") == [("forged", wrong_shard, d["event_id"])]


def test_fold_receipt_and_lifecycle_events_in_the_wrong_shard_are_forged(db, e):
    c = e.create("alice")
    _, read = e.read("bob", mid(c))
    _, reg = e.register("carol", "reviewer")
    result = projection.fold(db, [c, ("receipts/alice/000001.jsonl", read), ("messages/carol/000001.jsonl", reg)])
    assert result.forged == 2
    assert directory.list_agents(db)["agents"] == []
    assert queries.list_messages(db, viewer="bob")["unread"] == 1


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_fold_create_id_conflict_lowest_event_id_wins(db, e, order):
    first = e.create("alice", "original", mid="msg_SAME")
    second = e.create("bob", "impostor", mid="msg_SAME", mentions=["x"])
    recs = [first, second]
    for i in order:
        fold(db, recs[i])
    m = message(db, "msg_SAME")
    assert m["author"]["agent_id"] == "alice"
    assert m["body"]["content"] == "original"
    assert m["refs"] == []
    assert issues(db, "conflict") == [("conflict", "messages/bob", second[1]["event_id"])]
    assert projection.verify_counters(db) == []


def test_fold_duplicate_events_change_nothing(db, e):
    c = e.create("alice", "hi")
    ed = e.edit("alice", mid(c), "hi2")
    r1 = fold(db, c, ed, c)
    r2 = fold(db, c, ed)
    assert r1.duplicates == 1
    assert r2.duplicates == 2
    assert r2.applied == []
    assert message(db, mid(c))["version"] == 1
    assert issues(db) == []


def test_fold_unknown_types_are_counted_not_applied(db, e):
    raw = {"type": "future.thing", "timestamp": "2026-01-01T00:00:00Z", "event_id": ev.new_ulid(), "v": 1, "x": 1}
    v2 = dict(e.create("alice")[1], v=2)
    result = projection.fold(db, [("events/000001.jsonl", raw), ("messages/alice/000001.jsonl", v2)])
    assert result.unknown == 2
    assert result.applied == []


# --------------------------------------------------------------------------- receipts


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_fold_read_then_unread_last_writer_wins(db, e, order):
    c = e.create("alice")
    recs = [e.read("bob", mid(c)), e.unread("bob", mid(c))]
    fold(db, c)
    for i in order:
        fold(db, recs[i])
    assert queries.list_messages(db, viewer="bob")["messages"][0]["is_read"] is False
    assert queries.list_messages(db, viewer="bob")["unread"] == 1
    assert projection.verify_counters(db) == []


def test_fold_a_large_batch_of_messages_keeps_the_counters_exact(db, e):
    """A sync can bring thousands of messages at once; they are inserted set-wise
    (without the per-row counter trigger) and the counters must come out the same."""
    from thrum.store.counters import BULK_INSERT_ROWS

    fold(db, e.create("alice", "before", mentions=["bob"]))
    creates = [
        e.create(("alice", "bob", "carol")[i % 3], f"m{i}", mentions=[("bob", "carol", "reviewer")[i % 3]])
        for i in range(BULK_INSERT_ROWS + 50)
    ]
    early = [mid(c) for c in creates[:40]]
    fold(db, e.read("bob", *early), e.archive("carol", *early[::2]), e.read("carol", *early[::4]))
    result = fold(db, *creates)
    assert len(result.applied) == len(creates)
    assert projection.verify_counters(db) == []
    bob = queries.list_messages(db, viewer="bob", mentions_of="bob")
    assert bob["total"] == 1 + sum(1 for i in range(len(creates)) if i % 3 == 0)
    assert bob["unread"] == bob["total"] - sum(1 for i in range(40) if i % 3 == 0)  # bob read those early
    # and the trigger is back: a single message afterwards is counted row by row
    fold(db, e.create("carol", "after", mentions=["bob"]))
    assert queries.list_messages(db, viewer="bob", mentions_of="bob")["total"] == bob["total"] + 1
    assert projection.verify_counters(db) == []


def test_a_large_batch_counts_only_its_own_rows_whatever_the_projection_holds(db, e):
    """The set-wise counters read the new rows (a rowid range) and look up their receipts
    by message id: a scan of messages or receipts would cost in proportion to the whole
    history (87 ms of a 10,000-message sync on a 1,000,000-message projection)."""
    from thrum.store.counters import BULK_COUNTER_SQL

    creates = [e.create("alice", f"m{i}", mentions=["bob"]) for i in range(300)]
    fold(db, *creates)
    fold(db, e.read("bob", *[mid(c) for c in creates]), e.archive("bob", *[mid(c) for c in creates[:100]]))
    db.execute_sql("ANALYZE")  # whatever statistics the planner has, the plan stays
    for sql in BULK_COUNTER_SQL:
        steps = [row[3] for row in db.execute_sql("EXPLAIN QUERY PLAN " + sql, (0,) * sql.count("?")).fetchall()]
        scans = [s for s in steps if s.startswith("SCAN") and "subquery" not in s and s != "SCAN x"]
        assert scans == [], (sql[:60], steps)
        assert any("rowid>?" in s for s in steps), steps


def test_fold_receipt_before_its_message_counts_when_it_arrives(db, e):
    c = e.create("alice", mentions=["bob"])
    fold(db, e.read("bob", mid(c)), e.archive("carol", mid(c)))
    fold(db, c)
    assert queries.list_messages(db, viewer="bob", mentions_of="bob")["unread"] == 0
    assert queries.list_messages(db, viewer="carol")["total"] == 0
    assert projection.verify_counters(db) == []


def test_fold_archive_hides_from_that_agent_only_and_is_final(db, e):
    c = e.create("alice")
    a1, a2 = e.archive("bob", mid(c)), e.archive("bob", mid(c))
    fold(db, c, a2)
    fold(db, a1)
    assert ids(queries.list_messages(db, viewer="bob")) == []
    assert ids(queries.list_messages(db, viewer="bob", include_archived=True)) == [mid(c)]
    assert ids(queries.list_messages(db, viewer="carol")) == [mid(c)]
    at = db.execute_sql("SELECT event_id FROM archive_marks").fetchone()[0]
    assert at == a1[1]["event_id"]


def test_fold_message_reads_view_shows_current_reads(db, e):
    c = e.create("alice")
    fold(db, c, e.read("bob", mid(c)), e.read("carol", mid(c)), e.unread("carol", mid(c)))
    rows = db.execute_sql("SELECT message_id, agent_id, session_id FROM message_reads").fetchall()
    assert rows == [(mid(c), "bob", "ses_bob")]


# --------------------------------------------------------------------------- groups, agents, sessions


def test_fold_group_recreate_drops_old_members(db, e):
    fold(db, e.register("alice", "dev"), e.group_create("team"), e.member_add("team", "alice"))
    assert directory.group_members(db, "team") == [{"type": "agent", "value": "alice"}]
    fold(db, e.group_delete("team"))
    with pytest.raises(NotFound):
        directory.group_members(db, "team")
    fold(db, e.group_create("team"))
    assert directory.group_members(db, "team") == []
    fold(db, e.member_add("team", "dev", mtype="role"))
    assert directory.group_members(db, "team", expand=True) == [{"type": "agent", "value": "alice"}]


def test_fold_group_events_in_any_order_agree(db, tmp_path, e):
    recs = [
        e.group_create("team"),
        e.member_add("team", "alice"),
        e.group_delete("team"),
        e.group_create("team"),
        e.member_add("team", "bob"),
        e.member_remove("team", "bob"),
        e.member_add("team", "carol"),
    ]
    fold(db, *reversed(recs))
    other = database.open_database(tmp_path / "other.db")
    database.create_schema(other)
    fold(other, *recs)
    assert (
        directory.group_members(db, "team")
        == directory.group_members(other, "team")
        == [{"type": "agent", "value": "carol"}]
    )


def test_fold_agent_cleanup_then_register_again(db, e):
    fold(db, e.register("alice", "dev"))
    fold(db, e.cleanup("alice"))
    assert directory.list_agents(db)["agents"] == []
    assert directory.get_agent(db, "alice") is None
    assert directory.list_agents(db, include_deleted=True)["agents"][0]["deleted"] is True
    fold(db, e.register("alice", "reviewer"))
    agent = directory.get_agent(db, "alice")
    assert agent["role"] == "reviewer"
    assert agent["deleted"] is False


def test_fold_cleanup_older_than_register_does_not_delete(db, e):
    old_cleanup = e.cleanup("alice")
    fold(db, e.register("alice", "dev"))
    fold(db, old_cleanup)
    assert directory.get_agent(db, "alice")["role"] == "dev"


def test_fold_session_end_before_start(db, e):
    start = e.session_start("alice", "ses_1")
    end = e.session_end("ses_1", "alice")
    fold(db, end)
    fold(db, start)
    [s] = directory.list_sessions(db)
    assert s["agent_id"] == "alice"
    assert s["started_at"]
    assert s["ended_at"]
    assert s["active"] is False
    assert directory.list_sessions(db, active_only=True) == []


def test_fold_a_session_is_each_agents_own_whatever_the_order(db, tmp_path, e):
    """Another agent's end (or start) naming a session id is a row of its own: it never
    ends or claims the session of the agent who started it (issue 31, finding 4)."""
    events = [
        e.session_start("alice", "ses_1"),
        e.session_end("ses_1", "bob"),
        e.session_start("bob", "ses_1"),
    ]
    fold(db, *events)
    other = database.open_database(tmp_path / "other.db")
    database.create_schema(other)
    fold(other, *reversed(events))
    assert directory.list_sessions(db) == directory.list_sessions(other)
    assert [s["session_id"] for s in directory.list_sessions(db, "alice", active_only=True)] == ["ses_1"]
    assert directory.session_info(db, "ses_1", "alice")["ended_at"] is None


def test_fold_active_sessions_are_counted_per_agent(db, e):
    fold(
        db,
        e.register("alice", "dev"),
        e.session_start("alice", "ses_1"),
        e.session_start("alice", "ses_2"),
        e.session_end("ses_2", "alice"),
    )
    assert directory.get_agent(db, "alice")["active_sessions"] == 1


# --------------------------------------------------------------------------- log level: catch_up, rebuild


def _write(log: EventLog, *records):
    log.append([d for _, d in records])


def test_catch_up_folds_only_new_lines_and_rebuild_agrees(db, tmp_log, tmp_path, e):
    c = e.create("alice", "one", mentions=["bob"])
    _write(tmp_log, e.register("alice", "dev"), e.register("bob", "qa"), c)
    r1 = projection.catch_up(db, tmp_log)
    assert len(r1.applied) == 3
    _write(tmp_log, e.edit("alice", mid(c), "two"), e.read("bob", mid(c)))
    r2 = projection.catch_up(db, tmp_log)
    assert len(r2.applied) == 2
    assert r2.duplicates == 0
    assert projection.catch_up(db, tmp_log).applied == []
    fresh = database.open_database(tmp_path / "fresh.db")
    result = projection.rebuild(fresh, tmp_log)
    assert result.applied == []  # not kept unless asked
    assert database.schema_version(fresh) == database.SCHEMA_VERSION
    assert queries.list_messages(fresh, viewer="bob") == queries.list_messages(db, viewer="bob")
    assert projection.verify_counters(fresh) == []
    assert projection.verify_counters(db) == []


def test_rebuild_keeps_kv_and_replaces_everything_else(db, tmp_log, e):
    c = e.create("alice")
    fold(db, c)  # in the db but not in the log
    db.execute_sql("INSERT INTO kv(key, value) VALUES ('ws.token.hint', 'x')")
    _write(tmp_log, e.create("bob"))
    projection.rebuild(db, tmp_log, keep_applied=True)
    assert [m["agent_id"] for m in queries.list_messages(db)["messages"]] == ["bob"]
    assert db.execute_sql("SELECT value FROM kv").fetchall() == [("x",)]


def test_rebuild_reports_its_progress_batch_by_batch_then_indexes_then_done(db, tmp_log, e, monkeypatch):
    creates = [e.create("alice", f"note {i}") for i in range(40)]
    _write(tmp_log, e.register("alice", "dev"), *creates[:20])
    _write(tmp_log, *creates[20:], e.read("alice", *[mid(c) for c in creates[:5]]))
    total_bytes = sum(tmp_log.path(s).stat().st_size for s in tmp_log.shards())
    monkeypatch.setattr(rebuild, "READ_CHUNK", 1000)
    monkeypatch.setattr(rebuild, "REBUILD_BATCH", 8)  # several batches out of 42 events
    reports = []
    projection.rebuild(db, tmp_log, progress=lambda *r: reports.append(r))
    phases = [r[0] for r in reports]
    assert phases[-2:] == ["indexes", "done"] and set(phases[:-2]) == {"load"}
    loads = reports[:-2]
    assert len(loads) >= 4  # one per batch, not one at the end only
    assert [r[1] for r in loads] == sorted(r[1] for r in loads)  # events only grow
    assert [r[2] for r in loads] == sorted(r[2] for r in loads)  # so do the bytes read
    assert loads[-1][1:4] == (42, total_bytes, total_bytes)
    assert reports[-1][1] == 42
    assert [r[4] for r in reports] == sorted(r[4] for r in reports)  # elapsed seconds
    assert queries.list_messages(db, viewer="bob")["total"] == 40


def test_rebuild_says_it_is_alive_while_it_builds_the_indexes(db, tmp_log, e, monkeypatch):
    """The finishing steps are a few long statements: whoever waits hears from the rebuild
    meanwhile (the starter gives up after a minute of silence)."""
    _write(tmp_log, e.register("alice", "dev"), *[e.create("alice", f"note {i}") for i in range(200)])
    monkeypatch.setattr(rebuild, "HEARTBEAT_S", 0.0)
    monkeypatch.setattr(rebuild, "HEARTBEAT_STEPS", 1000)
    reports = []
    projection.rebuild(db, tmp_log, progress=lambda *r: reports.append(r))
    phases = [r[0] for r in reports]
    assert phases.count("indexes") > 2 and phases[-1] == "done"
    finishing = [r for r in reports if r[0] == "indexes"]
    assert all(r[1] == 201 for r in finishing)
    assert [r[4] for r in reports] == sorted(r[4] for r in reports)  # elapsed seconds only grow
    assert queries.list_messages(db, viewer="bob")["total"] == 200


def test_rebuild_interrupted_leaves_no_schema_version(tmp_path, tmp_log, e, monkeypatch):
    _write(tmp_log, e.create("alice"))
    opened = database.open_database(tmp_path / "x.db")

    def boom(*a, **k):
        raise RuntimeError("power cut")

    monkeypatch.setattr(database, "finish_schema", boom)
    with pytest.raises(RuntimeError):
        projection.rebuild(opened, tmp_log)
    assert database.schema_version(opened) is None


def test_a_rebuild_batch_ends_after_so_many_bytes_of_the_log_however_few_events(db, tmp_log, e, monkeypatch):
    """Receipts name up to 100 messages each: batches counted in events alone held millions
    of read marks at once."""
    creates = [e.create("alice", f"note {i}", mentions=["bob"]) for i in range(60)]
    receipts = [e.read("bob", *[mid(c) for c in creates[i : i + 20]]) for i in range(0, 60, 20)]
    _write(tmp_log, e.register("alice", "dev"), *creates, *receipts)
    monkeypatch.setattr(rebuild, "READ_CHUNK", 1000)
    monkeypatch.setattr(rebuild, "REBUILD_BATCH", 1_000_000)
    monkeypatch.setattr(rebuild, "REBUILD_BATCH_BYTES", 3000)
    batches = []
    real_fold = rebuild.fold

    def counted(db_, records, **kwargs):
        batches.append(len(records))
        return real_fold(db_, records, **kwargs)

    monkeypatch.setattr(rebuild, "fold", counted)
    projection.rebuild(db, tmp_log)
    assert len(batches) >= 4 and sum(batches) == 64
    assert queries.list_messages(db, viewer="bob", unread_for="bob")["total"] == 0  # every receipt folded


def _settings(db):
    names = ("journal_mode", "synchronous", "cache_size", "temp_store", "threads", "mmap_size")
    return {n: db.execute_sql(f"PRAGMA {n}").fetchone()[0] for n in names}


def test_rebuild_gives_the_connection_back_as_the_daemon_opened_it(db, tmp_log, e, monkeypatch):
    """A rebuild loads without a journal or syncs and finishes with its own cache and sorter
    settings; afterwards, and after a rebuild that failed half-way, the connection is the
    daemon's again (WAL, synchronous NORMAL, its cache, temporary data in memory)."""
    opened = _settings(db)
    assert opened["journal_mode"] == "wal" and opened["temp_store"] == 2
    _write(tmp_log, e.register("alice", "dev"), e.create("alice", "hello", mentions=["bob"]))
    during = {}
    finish = database.finish_schema

    def finishing(*args, **kwargs):
        during.update(_settings(db))
        return finish(*args, **kwargs)

    monkeypatch.setattr(database, "finish_schema", finishing)
    projection.rebuild(db, tmp_log)
    assert during["journal_mode"] == "off" and during["temp_store"] == 1  # a file: runs spill to disk
    assert during["cache_size"] == rebuild.FINISH_PRAGMAS["cache_size"] and during["mmap_size"] == 0
    assert _settings(db) == opened

    def boom(*args, **kwargs):
        raise RuntimeError("power cut")

    monkeypatch.setattr(database, "finish_schema", boom)
    with pytest.raises(RuntimeError):
        projection.rebuild(db, tmp_log)
    assert _settings(db) == opened


def test_rebuild_lets_go_of_the_verdict_memory_before_its_finishing_steps(db, tmp_log, tmp_path, e, monkeypatch):
    """The digests of every line judged (~100 MB at a million lines) serve the load only."""
    memory = VerdictMemory(tmp_path / "verified-lines")
    fold_fn = VerifiedFold(Verifier(KeyRing(None, None)), memory)
    memory.load()
    _write(tmp_log, e.register("alice", "dev"))
    loaded_while_finishing = []
    finish = database.finish_schema

    def finishing(*args, **kwargs):
        loaded_while_finishing.append(memory.known() is not None)
        return finish(*args, **kwargs)

    monkeypatch.setattr(database, "finish_schema", finishing)
    projection.rebuild(db, tmp_log, fold_fn=fold_fn)
    assert loaded_while_finishing == [False]


def test_catch_up_in_chunks_gives_the_same_state(db, tmp_log, tmp_path, e, monkeypatch):
    recs = [e.create("alice", "x" * 200, mentions=["bob"]) for _ in range(50)]
    _write(tmp_log, *recs)
    monkeypatch.setattr(rebuild, "READ_CHUNK", 1000)
    monkeypatch.setattr(rebuild, "REBUILD_BATCH", 7)
    result = projection.catch_up(db, tmp_log)
    assert len(result.applied) == 50
    assert queries.list_messages(db, viewer="bob", page_size=100)["total"] == 50
    assert projection.catch_up(db, tmp_log).applied == []


def test_fold_counts_reports_malformed_and_forged(db, tmp_log, e):
    _write(tmp_log, e.create("alice"))
    with open(tmp_log.root / "messages" / "alice" / "000001.jsonl", "ab") as f:
        f.write(b"{not json}\n")
    shard, d = e.create("bob")
    with open(tmp_log.root / "messages" / "alice" / "000001.jsonl", "ab") as f:
        f.write(ev.encode_line(d))
    result = projection.catch_up(db, tmp_log)
    assert result.malformed == 1
    assert result.forged == 1
    assert len(result.applied) == 1
    assert projection.fold_counts(db) == {"malformed": 1, "forged": 1}
    summary = directory.fold_issue_summary(db)
    assert summary["total"] == 2
    assert {i["kind"] for i in summary["recent"]} == {"malformed", "forged"}


def test_time_keys_sort_mixed_precision(db, e):
    a = e.create("alice", "a", ts="2026-02-03T10:00:00Z")
    b = e.create("alice", "b", ts="2026-02-03T10:00:00.500Z")
    c = e.create("alice", "c", ts="2026-02-03T10:00:01.000000001Z")
    fold(db, a, b, c)
    assert ids(queries.list_messages(db, sort_order="asc")) == [mid(a), mid(b), mid(c)]
    assert queries.get_message(db, mid(a))["message"]["created_at"] == "2026-02-03T10:00:00Z"


def test_verify_counters_reports_a_counter_that_drifted(db, e):
    c = e.create("alice", mentions=["bob"])
    fold(db, c, e.read("bob", mid(c)), e.archive("bob", mid(c)))
    assert projection.verify_counters(db) == []
    db.execute_sql("UPDATE agent_sig_counts SET n_read = n_read + 1")
    db.execute_sql("UPDATE sig_totals SET n = n + 5")
    problems = projection.verify_counters(db)
    assert len(problems) == 2
    assert any(p.startswith("agent_sig_counts") for p in problems)


def test_counters_follow_delete_replace_and_unread(db, e):
    a = e.create("bob", "late winner", mid="msg_X", mentions=["alice"])
    b = e.create("carol", "early loser?", mid="msg_X", mentions=["dave"])  # higher event id: loses
    fold(db, b, e.read("alice", "msg_X"), e.archive("dave", "msg_X"))
    fold(db, a)  # replaces carol's row: counters move from dave's set to alice's
    assert projection.verify_counters(db) == []
    assert queries.list_messages(db, viewer="alice", mentions_of="alice")["unread"] == 0
    fold(db, e.unread("alice", "msg_X"), e.delete("bob", "msg_X"))
    assert projection.verify_counters(db) == []
    assert queries.list_messages(db, viewer="alice", mentions_of="alice")["total"] == 0


def test_an_event_a_handler_cannot_apply_is_recorded_and_the_rest_of_the_batch_folds(db):
    from store_helpers import Events

    e = Events()
    good = e.create("alice", "kept")
    shard, bad = e.rec(ev.AgentUpdate(agent_id="alice", work_contexts=({"session_id": "ses_x"},), **e._common()))
    bad = dict(bad, work_contexts=[{"session_id": "ses_x", "weird": {1, 2}}])  # no JSON form: the handler raises
    result = projection.fold(db, [e.register("alice", "implementer"), (shard, bad), good])
    assert result.invalid == 1
    assert db.execute_sql("SELECT body_content FROM messages").fetchall() == [("kept",)]
    kinds = db.execute_sql("SELECT kind, event_id FROM fold_issues").fetchall()
    assert kinds == [("invalid", bad["event_id"])]


def test_refused_lines_past_the_bound_are_counted_per_file_and_kind(db, monkeypatch):
    """A remote that pushes a million refused lines grows one row per file and kind, not
    one per line (issue 31, finding 9); the counts stay exact and lines judged again are
    let go of wherever they were recorded."""
    from thrum.store import issues as issues_mod

    monkeypatch.setattr(issues_mod, "ROWS_PER_KIND", 3)
    refused = [("unknown-signer", "messages/x/000001.jsonl", f"E{i:02d}", "no key yet") for i in range(10)]
    refused += [("unsigned", "messages/y/000001.jsonl", f"U{i:02d}", "no signature") for i in range(2)]
    projection.fold(db, [], refused=refused)
    rows = db.execute_sql("SELECT kind, count FROM fold_issues ORDER BY key").fetchall()
    assert len(rows) == 3 + 1 + 2
    assert projection.fold_counts(db) == {"unknown-signer": 10, "unsigned": 2}
    projection.fold(db, [], refused=refused[:3])  # judged again: the single rows stay single
    assert projection.fold_counts(db) == {"unknown-signer": 10, "unsigned": 2}
    gone = [f"{k}:{s}:{e}" for k, s, e, _ in (refused[0], refused[9])]  # one row, one counted line
    projection.fold(db, [], resolved=gone)
    assert projection.fold_counts(db)["unknown-signer"] == 8


def test_a_batch_folded_again_one_by_one_gives_its_messages_mention_sets_that_exist(db):
    """The fold caches mention set ids (by the mentions as written, and by the set); a batch
    undone and folded again one by one must not reuse an id made in the undone attempt."""
    from store_helpers import Events

    e = Events()
    good = e.create("alice", "kept", mentions=["@bob", "carol", "bob"])
    shard, bad = e.rec(ev.AgentUpdate(agent_id="alice", work_contexts=({"session_id": "ses_x"},), **e._common()))
    bad = dict(bad, work_contexts=[{"session_id": "ses_x", "weird": {1, 2}}])  # no JSON form: the handler raises
    result = projection.fold(db, [e.register("alice", "implementer"), good, (shard, bad)])
    assert result.invalid == 1
    rows = db.execute_sql(
        "SELECT s.sig FROM messages m JOIN mention_sigs s ON s.sig_id = m.sig_id WHERE m.message_id = ?",
        (mid(good),),
    ).fetchall()
    assert rows == [('["bob","carol"]',)]
    targets = db.execute_sql("SELECT target FROM mention_sig_targets ORDER BY target").fetchall()
    assert targets == [("bob",), ("carol",)]
