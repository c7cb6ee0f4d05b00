"""The search query language (thrum/search_query.py): what each operator and filter parses to, and
that nothing a person types makes it fail other than with one line naming the problem."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thrum import errors
from thrum import events as ev
from thrum.search_query import FIELDS, MAX_QUERY_CHARS, PRIORITIES, Term, parse

NOW = datetime(2026, 3, 10, 15, 30, tzinfo=timezone.utc)


def p(text: str):
    return parse(text, now=NOW)


def problem(text: str) -> str:
    with pytest.raises(errors.ValidationError) as info:
        p(text)
    assert info.value.data == {"field": "query"}
    assert "\n" not in info.value.message and info.value.message.startswith("invalid query: ")
    return info.value.message


def test_words_phrases_prefixes_and_exclusions():
    q = p('auth "token refresh" pars* -flaky -"known issue" "a phr"*')
    assert q.terms == (
        Term("auth"),
        Term("token refresh", phrase=True),
        Term("pars", prefix=True),
        Term("flaky", negated=True),
        Term("known issue", phrase=True, negated=True),
        Term("a phr", phrase=True, prefix=True),
    )
    assert q.match_expression() == '"auth" AND "token refresh" AND "pars" * AND "a phr" * NOT "flaky" NOT "known issue"'
    assert p("-flaky -x").match_expression() is None
    assert p("-flaky -x").exclusion_expression() == '"flaky" OR "x"'


def test_identifiers_are_single_terms_and_quotes_inside_terms_cannot_escape():
    assert p("parse_config store/fold.py message.create").terms == (
        Term("parse_config"),
        Term("store/fold.py"),
        Term("message.create"),
    )
    assert p("well-known").terms == (Term("well-known"),)  # a hyphen inside a word is not an exclusion
    assert Term('say "hi"').fts() == '"say ""hi"""'  # FTS5's own escaping: the term stays one string


def test_every_filter():
    q = p(
        "from:alice from:@bob to:@reviewer to:carol scope:module:auth ref:issue:42 in:thr_01ABCD "
        "in:msg_01M8D6FH is:unread is:archived priority:HIGH priority:critical after:2026-03-01 before:3d"
    )
    assert q.authors == ("alice", "bob")
    assert q.recipients == ("reviewer", "carol")
    assert q.scopes == (("module", "auth"),)
    assert q.refs == (("issue", "42"),)
    assert q.threads == ("thr_01ABCD", "msg_01M8D6FH")
    assert (q.unread, q.archived) == (True, True)
    assert q.priorities == ("high", "critical")
    assert q.after == "2026-03-01T00:00:00.000Z"
    assert q.before == "2026-03-07T15:30:00.000Z"
    assert q.terms == () and q.match_expression() is None
    assert p('scope:"file:a b.py"').scopes == (("file", "a b.py"),)  # quoted values keep their spaces
    assert p("ref:commit:ab:cd").refs == (("commit", "ab:cd"),)  # the value may hold colons
    assert p("FROM:alice").authors == ("alice",)  # field names in any case


def test_dates_times_and_ages():
    assert p("after:2026-03-01T14:00").after == "2026-03-01T14:00:00.000Z"
    assert p("after:2026-03-01T14:00+02:00").after == "2026-03-01T12:00:00.000Z"
    assert p("after:2026-03-01T14:00:05.123Z").after == "2026-03-01T14:00:05.123Z"
    assert p("after:12h").after == "2026-03-10T03:30:00.000Z"
    assert p("after:2w").after == "2026-02-24T15:30:00.000Z"
    q = p("after:2026-01-01 after:2026-02-01 before:2026-03-01 before:2026-02-15")
    assert (q.after, q.before) == ("2026-02-01T00:00:00.000Z", "2026-02-15T00:00:00.000Z")  # all must hold


def test_me_names_the_caller():
    q = p("from:me to:@me hello")
    assert q.needs_caller and not p("hello").needs_caller
    assert p("is:unread").needs_caller and p("is:archived").needs_caller
    named = q.for_caller("ann")
    assert (named.authors, named.recipients, named.terms) == (("ann",), ("ann",), (Term("hello"),))


@pytest.mark.parametrize(
    "text, words",
    [
        ('"unclosed phrase', 'unbalanced quote: the " at character 1 is never closed'),
        ("auth from:", "from: at character 6 has no value"),
        ("foo:bar", "unknown field 'foo:' at character 1"),
        ("http://example.com", "put text with a colon in quotes"),
        ("-", "a lone '-' at character 1 excludes nothing"),
        ("a - b", "a lone '-' at character 3"),
        ("*", "a lone '*'"),
        ("fo*o", "'*' works only at the end of a word"),
        ("---", "has no letters or digits"),
        ('""', "has no letters or digits"),
        ("", "it is empty"),
        ("   ", "it is empty"),
        ("is:read", "is: takes unread or archived"),
        ("priority:urgent", "priority: takes low, normal, high, critical"),
        ("scope:auth", "scope: takes TYPE:VALUE"),
        ("in:thread", "in: takes a thread id"),
        ("after:yesterday", "after: takes a date"),
        ("before:2026-02-30", "before: takes a date"),
        ("after:9999999w", "after: takes a date"),
        ("-from:alice", "'-' excludes words and phrases, not filters"),
        ("a\x00b", "NUL"),
    ],
)
def test_invalid_queries_get_one_line_naming_the_problem(text, words):
    assert words in problem(text)


def test_limits():
    assert "at most 1,000" in problem("a" * (MAX_QUERY_CHARS + 1))
    assert "more than 32 words" in problem(" ".join(f"w{i}" for i in range(33)))
    with pytest.raises(errors.ValidationError):
        parse(42, now=NOW)


def test_the_priorities_are_the_events_priorities():
    assert set(PRIORITIES) == set(ev.PRIORITIES)


_PIECES = st.sampled_from(
    ['"', "-", "*", ":", "from:", "to:@", "is:", "in:", "scope:", "after:", "before:", "priority:", " ", "_", ".", "/"]
    + [f + ":" for f in FIELDS]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), _PIECES), max_size=12).map("".join))
def test_any_text_parses_or_gets_a_one_line_query_error(text):
    try:
        q = parse(text, now=NOW)
    except errors.ValidationError as exc:
        assert exc.data == {"field": "query"}
        assert "\n" not in exc.message and "\r" not in exc.message
        return
    selects = (q.authors, q.recipients, q.scopes, q.refs, q.threads, q.priorities, q.unread, q.archived, q.after)
    assert q.terms or any(selects) or q.before  # an empty query is an error, never "everything"
    for term in q.terms:
        assert '"' not in term.text and term.text  # quotes end a phrase; Term.fts quotes the rest
