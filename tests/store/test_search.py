"""Search in the store (thrum/store/search.py, search_index.py): tokenisation of code, every operator
and filter, the inbox's view, edits and deletes, ranking, snippets, the index check and its repair."""

from __future__ import annotations

import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thrum import errors
from thrum import events as ev
from thrum.search_query import parse
from thrum.store import database, projection, queries, search_beside, search_index
from thrum.store.log import EventLog
from thrum.store.search import search_messages, segments

from store_helpers import Events, fold, ids, mid

NOW = "2026-02-03T12:00:00.000Z"
NOW_DT = datetime(2026, 2, 3, 12, tzinfo=timezone.utc)


def run(db, text: str, viewer: str | None = "alice", **kw) -> dict:
    q = parse(text, now=NOW_DT)
    if viewer is not None:
        q = q.for_caller(viewer)
    return search_messages(db, q, viewer=viewer, now=NOW, page_size=100, **kw)


def found(db, text: str, viewer: str | None = "alice") -> set[str]:
    result = run(db, text, viewer)
    assert result["total"] == len(result["messages"])
    return {m["message_id"] for m in result["messages"]}


def marked(segs) -> str:
    return "".join(f"[{s['text']}]" if s["hit"] else s["text"] for s in segs)


@pytest.fixture
def e():
    return Events()


@pytest.fixture
def team(db, e):
    fold(
        db,
        e.register("alice", "dev"),
        e.register("bob", "reviewer"),
        e.register("carol", "reviewer"),
        e.group_create("core"),
        e.member_add("core", "alice"),
    )
    return e


# --------------------------------------------------------------------------- tokenisation of code


def test_identifiers_are_found_by_their_parts_and_whole(db, team):
    e = team
    snake = e.create("bob", "fix parse_config before release")
    dotted = e.create("bob", "message.create is folded first")
    camel = e.create("bob", "FoldResult and parseHTTPRequest leak")
    path = e.create("bob", "see thrum/store/search_index.py line 40")
    prose = e.create("bob", "config parse happens once; result fold is fine; the request was create message")
    fold(db, snake, dotted, camel, path, prose)
    s, d, c, p, x = (mid(r) for r in (snake, dotted, camel, path, prose))
    # whole: the identifier as written (its parts in that order), not the same words elsewhere
    assert found(db, "parse_config") == {s}
    assert found(db, "message.create") == {d}
    assert found(db, "FoldResult") == {c}
    assert found(db, "parseHTTPRequest") == {c}
    assert found(db, "thrum/store/search_index.py") == {p}
    assert found(db, "search_index.py") == {p}
    # parts: each alone, whatever the case
    assert found(db, "parse") == {s, c, x}
    assert found(db, "Config") == {s, x}
    assert found(db, "create") == {d, x}
    assert found(db, "result") == {c, x}
    assert found(db, "http") == {c}
    assert found(db, "REQUEST") == {c, x}
    assert found(db, "search_index") == {p}
    assert found(db, "index") == {p}
    assert found(db, "store search") == {p}
    # prefixes, of a word, a part and a whole
    assert found(db, "pars*") == {s, c, x}
    assert found(db, "parse_con*") == {s}
    assert found(db, "foldres*") == {c}


def test_case_and_accents_do_not_matter(db, team):
    r = team.create("bob", "Le Café est fermé; NAÏVE approach")
    fold(db, r)
    for q in ("cafe", "CAFÉ", "ferme", "naive", "Naïve"):
        assert found(db, q) == {mid(r)}, q


# --------------------------------------------------------------------------- operators and filters


def test_words_phrases_prefixes_and_exclusions(db, team):
    e = team
    a = e.create("bob", "the auth token refresh is flaky")
    b = e.create("bob", "refresh the token for auth later")
    c = e.create("bob", "authentication works")
    fold(db, a, b, c)
    assert found(db, "auth token") == {mid(a), mid(b)}  # every word, anywhere
    assert found(db, '"auth token"') == {mid(a)}  # next to each other, in order
    assert found(db, '"token auth"') == set()
    assert found(db, "auth*") == {mid(a), mid(b), mid(c)}
    assert found(db, '"token ref"*') == {mid(a)}
    assert found(db, "auth -flaky") == {mid(b)}
    assert found(db, 'token -"auth token"') == {mid(b)}
    assert found(db, "-flaky") == {mid(b), mid(c)}  # exclusions alone: everything else in view


def test_every_filter(db, team):
    e = team

    def at(day: int) -> str:
        return f"2026-02-{1 + day:02d}T08:00:00.000Z"

    to_alice = e.create("bob", "deploy now", mentions=["alice"], ts=at(0))
    to_devs = e.create("carol", "deploy later", mentions=["dev"], scopes=[("module", "auth")], ts=at(1))
    to_core = e.create(
        "bob", "deploy group", mentions=["core"], refs=[("issue", "42")], ts=at(2), thread_id="thr_AAAA1"
    )
    to_all = e.create("carol", "deploy all", mentions=["everyone"], priority="high", ts=at(3), thread_id="thr_AAAA1")
    mine = e.create("alice", "deploy mine", mentions=["bob"], priority="critical", ts=at(4))
    fold(db, to_alice, to_devs, to_core, to_all, mine, e.read("alice", mid(to_devs)))
    every = {mid(r) for r in (to_alice, to_devs, to_core, to_all, mine)}
    assert found(db, "deploy") == every
    assert found(db, "deploy from:bob") == {mid(to_alice), mid(to_core)}
    assert found(db, "deploy from:bob from:carol") == {mid(to_alice), mid(to_core), mid(to_devs), mid(to_all)}
    assert found(db, "deploy from:me") == {mid(mine)}
    # to: as the inbox resolves mentions: alice is reached by her name, role, groups, everyone
    assert found(db, "to:me") == {mid(to_alice), mid(to_devs), mid(to_core), mid(to_all)}
    assert found(db, "to:@dev") == {mid(to_devs), mid(to_all)}
    assert found(db, "to:@core") == {mid(to_core), mid(to_all)}
    assert found(db, "to:bob") == {mid(mine), mid(to_all)}
    assert found(db, "to:bob to:@reviewer") == {mid(to_all)}  # a role is reached by its name, not its agents'

    assert found(db, "scope:module:auth") == {mid(to_devs)}
    assert found(db, "ref:issue:42") == {mid(to_core)}
    assert found(db, "in:thr_AAAA1") == {mid(to_core), mid(to_all)}
    assert found(db, "priority:high") == {mid(to_all)}
    assert found(db, "priority:high priority:critical") == {mid(to_all), mid(mine)}
    assert found(db, "is:unread") == {mid(to_alice), mid(to_core), mid(to_all)}  # her own are never unread
    assert found(db, f"after:{at(2)[:10]}") == {mid(to_core), mid(to_all), mid(mine)}
    assert found(db, f"before:{at(2)}") == {mid(to_alice), mid(to_devs)}
    assert found(db, f"after:{at(1)} before:{at(3)} deploy") == {mid(to_devs), mid(to_core)}
    assert found(db, "deploy from:bob -group is:unread") == {mid(to_alice)}


def test_filters_find_every_message_whatever_their_values_look_like(db, team):
    """from:, scope: and ref: are first narrowed inside the index by their words; values that
    tokenise oddly (punctuation, accents, quotes, nothing to tokenise) must still be found."""
    e = team
    values = ["a b.py", "naïve/ü", "---", "x", "mod:18", "ÅSA-42"]
    recs = [e.create("bob", "note", scopes=[("file", v)], refs=[("issue", v)]) for v in values]
    other = e.create("carol", "note", scopes=[("file", "a b.py")])
    fold(db, *recs, other)
    for v, r in zip(values, recs):
        assert found(db, f'scope:"file:{v}" from:bob') == {mid(r)}, v
        assert found(db, f'ref:"issue:{v}" note') == {mid(r)}, v
    assert found(db, 'scope:"file:a b.py"') == {mid(recs[0]), mid(other)}
    assert found(db, "from:bob from:carol note") == {mid(r) for r in recs} | {mid(other)}


def test_a_search_covers_what_the_inbox_covers(db, team):
    e = team
    recs = [
        e.create(author, f"release note {i}", mentions=[m], scopes=[("module", "m" + str(i % 2))])
        for i, (author, m) in enumerate(
            [("bob", "alice"), ("carol", "dev"), ("alice", "bob"), ("bob", "everyone"), ("carol", "reviewer")] * 3
        )
    ]
    gone = e.create("bob", "release note gone")
    fold(db, *recs, gone, e.delete("bob", mid(gone)), e.archive("alice", mid(recs[0]), mid(recs[5])))
    fold(db, e.read("alice", mid(recs[1]), mid(recs[3])))
    pairs = [
        ("release", {}),
        ("from:bob", {"author_id": "bob"}),
        ("is:unread", {"unread_for": "alice"}),
        ("is:archived", {"archived_only": True}),
        ("scope:module:m1", {"scope": {"type": "module", "value": "m1"}}),
        ("to:me", {"mentions_of": "alice"}),
        ("to:@reviewer", {"mention_role": "reviewer"}),
    ]
    for text, kw in pairs:
        listed = queries.list_messages(db, viewer="alice", page_size=100, **kw)
        searched = run(db, text)
        assert set(ids(searched)) == set(ids(listed)), text
        assert searched["total"] == listed["total"], text
    assert mid(gone) not in found(db, "gone")
    assert found(db, "gone") == set()
    # another viewer has archived nothing: it sees the messages alice archived
    assert mid(recs[0]) in found(db, "release", viewer="bob")
    # without a viewer nothing is archived and nothing is read
    assert run(db, "release", viewer=None)["total"] == len(recs)
    with pytest.raises(errors.ValidationError):
        run(db, "is:unread", viewer=None)


def test_edits_deletes_and_archives_are_reflected_at_once(db, team):
    e = team
    r = team.create("bob", "the quarterly migration plan")
    fold(db, r)
    m = mid(r)
    assert found(db, "migration") == {m}
    fold(db, e.edit("bob", m, "the yearly rollout plan"))
    assert found(db, "migration") == set()  # the old words are gone
    assert found(db, "rollout") == {m}  # the new ones are there
    assert found(db, "plan") == {m}
    fold(db, e.archive("alice", m))
    assert found(db, "rollout") == set()
    assert found(db, "rollout is:archived") == {m}
    assert found(db, "rollout", viewer="carol") == {m}
    fold(db, e.delete("bob", m))
    assert found(db, "rollout is:archived") == set()
    assert found(db, "plan", viewer="carol") == set()
    assert search_index.check(db, thorough=True) is None


def test_author_role_and_thread_subject_are_searchable_and_follow_changes(db, team):
    e = team
    first = e.create(
        "bob", "kick off", thread_id="thr_BBBB1", subject="Quarterly planning", ts="2026-02-01T10:00:00.000Z"
    )
    reply = e.create("carol", "sounds good", thread_id="thr_BBBB1", ts="2026-02-01T11:00:00.000Z")
    fold(db, reply)  # the reply arrives first: no subject in its thread yet
    assert found(db, "quarterly") == set()
    fold(db, first)
    assert found(db, "quarterly") == {mid(first), mid(reply)}  # the reply is found by its thread's subject
    earlier = e.create("carol", "pre", thread_id="thr_BBBB1", subject="Budget", ts="2026-02-01T09:00:00.000Z")
    fold(db, earlier)  # an earlier subject becomes the thread's
    assert found(db, "budget") == {mid(first), mid(reply), mid(earlier)}
    assert found(db, "quarterly") == {mid(first)}  # still its own subject
    fold(db, e.delete("carol", mid(earlier)))
    assert found(db, "budget") == set()
    assert found(db, "quarterly") == {mid(first), mid(reply)}
    assert found(db, "carol") == {mid(reply)}  # the author's name
    assert found(db, "reviewer") == {mid(first), mid(reply)}  # and role
    fold(db, e.register("carol", "lead"))
    assert found(db, "reviewer") == {mid(first)}
    assert found(db, "lead") == {mid(reply)}
    assert search_index.check(db, thorough=True) is None


def test_tags_are_searchable_but_reply_ids_are_not(db, team):
    e = team
    parent = e.create("bob", "root")
    child = e.create(
        "carol", "child", refs=[("reply_to", mid(parent)), ("issue", "thrum-77")], scopes=[("file", "a.py")]
    )
    fold(db, parent, child)
    assert found(db, "thrum-77") == {mid(child)}
    assert found(db, "a.py") == {mid(child)}
    assert found(db, mid(parent)) == set()


# --------------------------------------------------------------------------- ranking, totals, snippets


def test_ranking_prefers_the_subject_and_then_recent_messages(db, team):
    e = team
    old_body = e.create("bob", "we discussed the rollout", ts="2026-01-01T10:00:00.000Z")
    new_body = e.create("bob", "we discussed the rollout", ts="2026-02-03T10:00:00.000Z")
    subject = e.create("bob", "see below", subject="Rollout", ts="2026-01-01T09:00:00.000Z")
    others = [e.create("carol", f"unrelated {i}", ts="2025-12-01T09:00:00.000Z") for i in range(10)]
    fold(db, old_body, new_body, subject, *others)  # (bm25 needs the word to be rarer than not)
    result = run(db, "rollout")
    assert ids(result) == [mid(subject), mid(new_body), mid(old_body)]
    scores = [m["score"] for m in result["messages"]]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    newest_first = run(db, "from:bob")  # no words: newest first
    assert ids(newest_first) == [mid(new_body), mid(old_body), mid(subject)]
    assert ids(run(db, "rollout", viewer=None)) == ids(result)  # the viewer changes the set, not the order


def test_totals_are_exact_and_pages_split_the_match(db, team):
    recs = [team.create("bob", f"build {i} failed" + (" again" if i % 3 == 0 else "")) for i in range(45)]
    fold(db, *recs, team.read("alice", *[mid(r) for r in recs[:10]]))
    q = parse("build failed", now=NOW_DT)
    pages = [search_messages(db, q, viewer="alice", now=NOW, page=n, page_size=20) for n in (1, 2, 3, 4)]
    assert [len(p["messages"]) for p in pages] == [20, 20, 5, 0]
    assert all((p["total"], p["total_pages"]) == (45, 3) for p in pages)
    assert run(db, "build failed is:unread")["total"] == 35
    seen = [m["message_id"] for p in pages for m in p["messages"]]
    assert len(seen) == len(set(seen)) == 45
    assert run(db, "again")["total"] == 15
    with pytest.raises(errors.ValidationError):
        search_messages(db, q, viewer="alice", now=NOW, page_size=101)


def test_snippets_mark_the_hits_and_no_text_can_pose_as_a_marker(db, team):
    long = " ".join(f"word{i}" for i in range(100))
    tricky = "\ue000fake\ue001 [x] «y» auth \ue002 end"
    a = team.create("bob", f"{long} the auth token {long}", subject="Auth token rotation")
    b = team.create("bob", tricky)
    fold(db, a, b)
    by_id = {m["message_id"]: m for m in run(db, "auth")["messages"]}
    snippet = marked(by_id[mid(a)]["snippet"])
    assert "[auth]" in snippet and snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) < 300
    assert marked(by_id[mid(a)]["subject_snippet"]) == "[Auth] token rotation"
    segs = by_id[mid(b)]["snippet"]
    assert "".join(s["text"] for s in segs) == tricky  # the text comes back whole, as it was
    assert [s["text"] for s in segs if s["hit"]] == ["auth"]
    assert segments("a\ue000Xb\ue001Yc", "\ue000X", "\ue001Y") == [
        {"text": "a", "hit": False},
        {"text": "b", "hit": True},
        {"text": "c", "hit": False},
    ]
    plain = run(db, "from:bob")["messages"][0]
    assert plain["snippet"] == [{"text": tricky, "hit": False}]


# --------------------------------------------------------------------------- rebuild, check, repair


def _write_log(root: Path, records) -> EventLog:
    for shard, d in records:
        path = root / ev.segment_path(shard, 1)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as f:
            f.write(ev.encode_line(d))
    return EventLog(root)


QUERIES = ["plan", "rollout plan", '"the plan"', "pla*", "-plan", "from:bob", "to:@reviewer", "quarterly", "lead"]


def test_a_rebuild_gives_identical_results(tmp_path, team, db):
    e = team
    records = [
        e.register("alice", "dev"),
        e.register("bob", "reviewer"),
        e.register("carol", "reviewer"),
        e.create("bob", "the plan", subject="Quarterly", thread_id="thr_CCCC1", mentions=["reviewer"]),
        e.create("carol", "a rollout plan", thread_id="thr_CCCC1"),
        e.create("carol", "planning ahead", mentions=["alice"]),
    ]
    records += [e.edit("carol", records[4][1]["message_id"], "the rollout plan, edited"), e.register("carol", "lead")]
    records.append(e.delete("carol", records[5][1]["message_id"]))
    log = _write_log(tmp_path / "log", records)
    incremental = database.open_database(tmp_path / "inc.db")
    database.create_schema(incremental)
    for r in records:
        projection.fold(incremental, [r])
    rebuilt = database.open_database(tmp_path / "rebuilt.db")
    result = projection.rebuild(rebuilt, log)
    assert "search_index" in result.timings
    for text in QUERIES:
        assert run(incremental, text) == run(rebuilt, text), text
    assert search_index.check(incremental, thorough=True) is None and search_index.check(rebuilt, thorough=True) is None


def test_the_check_finds_an_index_that_disagrees_and_the_repair_rebuilds_it(db, team):
    a = team.create("bob", "alpha beta")
    b = team.create("bob", "gamma delta")
    fold(db, a, b)
    assert search_index.check(db, thorough=True) is None
    # a message changed behind the index's back (its triggers gone): the check sees it
    db.execute_sql("DROP TRIGGER trg_search_messages_upd_before")
    db.execute_sql("DROP TRIGGER trg_search_messages_upd_after")
    db.execute_sql("UPDATE messages SET body_content = 'epsilon' WHERE message_id = ?", (mid(a),))
    assert "1 of the messages sampled are not found by their current words" in search_index.check(db)
    assert "1 of the messages sampled" in search_index.check(db, thorough=True)
    search_index.rebuild_index(db)
    assert search_index.check(db, thorough=True) is None
    assert found(db, "epsilon") == {mid(a)} and found(db, "alpha") == set()
    # an entry lost: counted
    db.execute_sql(
        "DELETE FROM message_search_docsize WHERE id = (SELECT rowid FROM messages WHERE message_id = ?)", (mid(b),)
    )
    assert "1 entries for 2 live messages" in search_index.check(db)
    search_index.rebuild_index(db)
    assert search_index.check(db, thorough=True) is None
    # a change the sample cannot see (its first words still found): only the thorough check does
    db.execute_sql("UPDATE messages SET body_content = 'one two three four' WHERE message_id = ?", (mid(a),))
    assert search_index.check(db, thorough=True) is None  # (the triggers followed that one)
    db.execute_sql("DROP TRIGGER trg_search_messages_upd_before")
    db.execute_sql("DROP TRIGGER trg_search_messages_upd_after")
    db.execute_sql("UPDATE messages SET body_content = 'one two three five' WHERE message_id = ?", (mid(a),))
    assert search_index.check(db) is None
    assert "does not match" in search_index.check(db, thorough=True)
    search_index.rebuild_index(db)
    # the repair brought the triggers back: changes are followed again
    fold(db, team.edit("bob", mid(b), "zeta"))
    assert found(db, "zeta") == {mid(b)}


# --------------------------------------------------------------------------- any query


_WORLD: dict = {}


def _world_db():
    if "db" not in _WORLD:
        tmp = Path(tempfile.mkdtemp(prefix="thrum-search-fuzz-"))
        db = database.open_database(tmp / "fuzz.db")
        database.create_schema(db)
        e = Events()
        fold(
            db,
            e.register("alice", "dev"),
            e.register("bob", "reviewer"),
            *[
                e.create("bob", text, mentions=["alice"], scopes=[("module", "auth")], thread_id="thr_DDDD1")
                for text in ("parse_config fails", 'FoldResult «x» "quoted" NEAR(a b) a OR b', "café * - ^ : ()")
            ],
        )
        _WORLD["db"] = db
    return _WORLD["db"]


_PIECES = st.sampled_from(
    ['"', "-", "*", ":", "(", ")", "^", "+", "NEAR", "OR", "AND", "NOT", "from:", "to:@", "is:unread", "in:thr_DDDD1"]
    + ["scope:module:auth", "after:", "before:3d", "priority:", " ", "_", ".", "/", "\\", "'", "{", "}", "\u0301"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=10), _PIECES), max_size=10).map("".join))
def test_any_query_gives_results_or_a_query_error_never_an_sqlite_error(text):
    db = _world_db()
    try:
        q = parse(text, now=NOW_DT).for_caller("alice")
    except errors.ValidationError:
        return
    result = search_messages(db, q, viewer="alice", now=NOW, page_size=10)
    assert result["total"] >= len(result["messages"])


def test_a_large_batch_is_indexed_set_wise_like_one_message_at_a_time(tmp_path, db, team):
    """A sync can bring thousands of messages in one fold: the index adds them after the rows
    (search_index.bulk_insert) and must end as if each had been folded alone."""
    e = team
    recs = []
    for i in range(260):
        thread = f"thr_EEEE{i % 7}"
        subject = f"topic{i % 7}" if i % 13 == 5 else ""
        recs.append(
            e.create("bob" if i % 2 else "carol", f"bulk note {i} FoldResult{i}", thread_id=thread, subject=subject)
        )
    one_by_one = database.open_database(tmp_path / "one.db")
    database.create_schema(one_by_one)
    fold(one_by_one, *[r for r in (team.register("bob", "reviewer"), team.register("carol", "reviewer"))])
    for r in recs:
        fold(one_by_one, r)
    fold(db, *recs)  # one batch: above counters.BULK_INSERT_ROWS
    for text in ["bulk", "note 17", "topic3", "result42", "from:bob topic1", "in:thr_EEEE2"]:
        assert run(db, text) == run(one_by_one, text), text
    assert search_index.check(db, thorough=True) is None
    assert db.execute_sql(
        "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'trg_search%'"
    ).fetchone()[0] == len(search_index.TRIGGERS)


# --------------------------------------------------------------------------- the index's shape after a rebuild


def _segments(db) -> dict[int, int]:
    """The index's segments: FTS5's segment id -> rows of its data table it holds (the id is
    the row id's bits above 37 in FTS5's layout; ids 1 and 10, its averages and structure,
    are segment 0)."""
    rows = db.execute_sql(
        "SELECT id >> 37, count(*) FROM message_search_data WHERE id >> 37 > 0 GROUP BY id >> 37"
    ).fetchall()
    return dict(rows)


def test_sends_after_a_rebuild_do_not_rewrite_the_rebuilt_index(tmp_path, monkeypatch, e):
    """A rebuilt index is one segment on top of FTS5's levels: the one-page segments the next
    commits add are merged among themselves, never with it (FTS5's own 'rebuild' left it
    on level 0, and the 4th, 16th, 64th... commit after it rewrote the whole index)."""
    monkeypatch.setattr(search_index, "TOP_MIN_MESSAGES", 300)  # the shape a large history gets
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa"]
    records = [e.register("bob", "reviewer"), e.register("alice", "dev")]
    records += [
        e.create(
            "bob", f"note {i} on {words[i % 8]} and {words[i * 3 % 8]} topic{i % 97}", thread_id=f"thr_FFFF{i % 40}"
        )
        for i in range(1500)
    ]
    db = database.open_database(tmp_path / "rebuilt.db")
    projection.rebuild(db, _write_log(tmp_path / "log", records))
    before = _segments(db)
    assert len(before) == 1  # one segment
    (rebuilt,) = before
    sends = [e.create("alice", f"later {i} on {words[i % 8]}") for i in range(150)]
    for r in sends:
        projection.fold(db, [r])
    after = _segments(db)
    assert after[rebuilt] == before[rebuilt]  # the rebuilt segment untouched, 150 commits later
    assert len(after) < 40  # and the new ones merged among themselves
    # and the index answers for both, as a replica that never rebuilt would
    assert run(db, "later")["total"] == 150 and run(db, "note")["total"] == 1500
    assert found(db, "later 2 gamma") == {mid(sends[2])}
    assert found(db, "topic5 epsilon") == {
        mid(r) for r in records[2:] if {"topic5", "epsilon"} <= set(r[1]["body"]["content"].split())
    }
    assert search_index.check(db, thorough=True) is None


def test_an_index_filled_in_pieces_holds_the_same_entries_as_one_filled_at_once(tmp_path, monkeypatch, e):
    """`search_index.build` on a large history (sample, lift, pieces, merge) and on a small one
    (one statement) give the same search results."""
    records = [e.register("bob", "reviewer"), e.register("carol", "lead")]
    records += [e.create("bob", f"item {i} FoldResult{i % 13} plan", thread_id=f"thr_GGGG{i % 9}") for i in range(700)]
    records.append(e.delete("bob", records[40][1]["message_id"]))
    records.append(e.edit("bob", records[41][1]["message_id"], "rewritten text"))
    log = _write_log(tmp_path / "log", records)
    whole = database.open_database(tmp_path / "whole.db")
    projection.rebuild(whole, log)
    for name, value in {"TOP_MIN_MESSAGES": 100, "TOP_SAMPLE": 4, "TOP_FIRST": 2, "LOAD_PIECES": 7}.items():
        monkeypatch.setattr(search_index, name, value)  # ~12 rounds of the sample, then 7 pieces
    pieces = database.open_database(tmp_path / "pieces.db")
    projection.rebuild(pieces, log)
    for text in ["item", "plan", "result7", "foldresult", "rewritten", "item 38", "from:bob item 5*", "in:thr_GGGG3"]:
        assert run(whole, text) == run(pieces, text), text
    assert run(pieces, "item")["total"] == 699 - 1  # one deleted, one edited
    assert found(pieces, "item 603") == {mid(records[2 + 603])} and found(pieces, "item 604") == {mid(records[2 + 604])}
    assert search_index.check(pieces, thorough=True) is None


def _shadow_rows(db) -> dict[str, list[tuple]]:
    return {t: db.execute_sql(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in search_index.SHADOW_TABLES}


def test_an_index_built_beside_the_query_indexes_is_the_one_built_in_place(tmp_path, monkeypatch, e):
    """A rebuild of a large history builds its search index on a second connection and thread,
    in a file of its own, and copies it in (`search_beside`): the same index, byte for byte, as
    the one built in place (one segment on the top level), which answers every query alike and
    keeps answering after sends."""
    records = [e.register("bob", "reviewer"), e.register("carol", "lead")]
    records += [
        e.create("bob", f"item {i} FoldResult{i % 13} plan", thread_id=f"thr_GGGG{i % 9}", subject=f"s{i % 5}")
        for i in range(700)
    ]
    records.append(e.delete("bob", records[40][1]["message_id"]))
    records.append(e.edit("bob", records[41][1]["message_id"], "rewritten text"))
    records.append(e.register("bob", "writer"))
    log = _write_log(tmp_path / "log", records)
    for name, value in {"TOP_MIN_MESSAGES": 100, "TOP_SAMPLE": 4, "TOP_FIRST": 2, "LOAD_PIECES": 7}.items():
        monkeypatch.setattr(search_index, name, value)  # the shape a large history's index gets
    in_place = database.open_database(tmp_path / "in_place.db")
    assert "search_index thread" not in projection.rebuild(in_place, log).timings  # (too few messages)
    monkeypatch.setattr(search_beside, "MIN_MESSAGES", 0)
    beside = database.open_database(tmp_path / "beside.db")
    assert "search_index thread" in projection.rebuild(beside, log).timings
    assert _shadow_rows(beside) == _shadow_rows(in_place)
    assert len(_segments(beside)) == 1
    assert not (tmp_path / "beside.db.search").exists()  # the side file is gone
    assert beside.execute_sql("PRAGMA journal_mode").fetchone()[0] == "wal"  # the daemon's, as before
    for text in ["item", "plan", "result7", "foldresult", "rewritten", "item 38", "from:bob item 5*", "in:thr_GGGG3"]:
        assert run(beside, text) == run(in_place, text), text
    assert run(beside, "s3")["total"] == run(in_place, "s3")["total"] > 0  # the threads' subjects, the roles
    assert run(beside, "writer")["total"] == 699
    later = [e.create("carol", f"later {i} plan") for i in range(5)] + [e.edit("bob", mid(records[50]), "now omega")]
    for db in (beside, in_place):  # the triggers came with it
        for r in later:
            projection.fold(db, [r])
        assert found(db, "omega") == {mid(records[50])} and run(db, "plan")["total"] == 699 - 2 + 5
        assert search_index.check(db, thorough=True) is None
    assert _shadow_rows(beside) == _shadow_rows(in_place)


def test_a_search_index_that_fails_beside_fails_the_rebuild_before_its_version(tmp_path, monkeypatch, e):
    """When the second connection cannot build the index, the rebuild raises, and the database
    has no schema version (it is rebuilt again; the daemon swaps in only a finished rebuild)."""
    records = [e.register("bob", "reviewer")] + [e.create("bob", f"item {i}") for i in range(50)]
    log = _write_log(tmp_path / "log", records)
    monkeypatch.setattr(search_beside, "MIN_MESSAGES", 0)
    (tmp_path / "messages.db.search").mkdir()  # where the second connection writes: it cannot
    (tmp_path / "messages.db.search" / "x").write_text("")
    db = database.open_database(tmp_path / "messages.db")
    with pytest.raises(search_beside.SearchIndexFailed, match="building the search index failed"):
        projection.rebuild(db, log)
    assert database.schema_version(db) is None
    assert db.execute_sql("SELECT count(*) FROM sqlite_master WHERE name = 'message_search'").fetchone()[0] == 0
    # and once it can, the next rebuild is whole
    (tmp_path / "messages.db.search" / "x").unlink()
    (tmp_path / "messages.db.search").rmdir()
    projection.rebuild(db, log)
    assert database.schema_version(db) == database.SCHEMA_VERSION and run(db, "item")["total"] == 50
    db.close()


def test_a_bulk_insert_finds_its_threads_by_the_new_rows_not_by_a_scan(db):
    """The threads whose subjects a received chunk sets are looked up in the chunk's rowid range:
    a scan of the thread index instead cost ~55 ms per chunk on a million messages."""
    plan = " ".join(
        str(r[3]) for r in db.execute_sql("EXPLAIN QUERY PLAN " + search_index.NEW_THREADS_WITH_SUBJECTS, (10,))
    )
    assert "INTEGER PRIMARY KEY (rowid>?)" in plan and "idx_messages_thread" not in plan
