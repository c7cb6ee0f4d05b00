"""The two paths through the one schema (thrum/events/schema.py) give one answer.

The fast path decodes a log line into its Struct in C (`schema.decode`); the general
path converts the parsed dict into the same Struct (`validation.normalise`, via
`codec.decode_checked`), after the leniencies the Structs declare, and words the
error. What the fast path accepts, the general path accepts, with the same normalised
event; what the general path refuses, the fast path refuses. (The fast path may refuse
a line the general path takes — an unknown type, a future version, a leniency no
writer uses — because `decode_line` then asks the general path: the last test holds
that.) tests/test_events_corpus.py holds both to the answers the hand-written checks
gave before the schema became the one declaration.
"""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thrum import events as ev
from thrum.events import codec, schema

from test_events import SAMPLES
from test_events_corpus import BAD_VALUES, RAW_LINES
from test_events_corpus import groups as corpus_groups


def both(line: bytes) -> tuple[object, object]:
    """(what the fast path gives, what the general path gives); a refusal is the string "refused"."""
    try:
        fast: object = schema.decode(line)
    except schema.Refused:
        fast = "refused"
    try:
        checked: object = codec.decode_checked(line)
    except ev.MalformedEvent:
        checked = "refused"
    return fast, checked


def agree(line: bytes) -> bool:
    """The fast path's answer is the general path's, or a refusal of a line the general path
    takes (which `decode_line` then hands to it). Returns whether the fast path accepted."""
    fast, checked = both(line)
    if fast == "refused":
        return False
    assert fast == checked, line
    return True


SIGNED = {
    "sig": {"by": "furiosa", "ed25519": "A" * 86 + "=="},
    "chain": {"seq": 2, "prev": "B" * 22, "log": "team:main"},
}


def sample_dicts() -> list[dict]:
    out = []
    for e in SAMPLES:
        d = e.to_dict()
        out.append(d)
        out.append({**d, **SIGNED})
    return out


def test_every_declared_wording_words_every_kind_of_refusal():
    """A template that names what it cannot fill would turn a refusal into a crash."""
    from thrum.events.checks import KINDS, fields_of, say

    for cls in (*schema.SCHEMA_TYPES, schema.Body, schema.Chain, schema.Invite, schema.Tag):
        for name, field in fields_of(cls).items():
            for kind in KINDS:
                line = say(field, kind, "x" * 100, n="64", event={"member_type": ""}, declared=fields_of(cls))
                assert line.startswith(field.name + ": ") and "\n" not in line and len(line) < 300, (cls, name, kind)


def test_every_written_event_is_taken_by_the_fast_path_as_the_general_path_takes_it():
    """Not vacuous: every event as the write path writes it (signed, chained or not) takes the fast path."""
    for d in sample_dicts():
        assert agree(ev.encode_line(d).rstrip(b"\n")), d["type"]


def test_a_decoded_event_encodes_the_same_whichever_path_decoded_it():
    """Keys in declaration order: an event read and written again is the same bytes."""
    for d in sample_dicts():
        line = ev.encode_line(d)
        assert ev.encode_line(schema.decode(line)) == ev.encode_line(codec.decode_checked(line))


# --------------------------------------------------------------------------- a corpus of malformed lines


def corpus() -> list[bytes]:
    """tests/test_events_corpus.py's lines: every sample with each field replaced or removed."""
    return [line for _, lines in corpus_groups() for line in lines]


def test_the_fast_path_refuses_what_the_general_path_refuses_over_a_corpus_of_malformed_lines():
    lines = corpus()
    taken = refused_by_both = 0
    for line in lines:
        fast, checked = both(line)
        if checked == "refused":
            assert fast == "refused", line
            refused_by_both += 1
        elif fast != "refused":
            assert fast == checked, line
            taken += 1
    assert refused_by_both > 10_000 and taken > 1000  # the corpus reaches both answers, many times


# --------------------------------------------------------------------------- generated events

_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(BAD_VALUES[7:20] + ["alice", "ses_1", "thr_1", "msg_1", "markdown", "high", "crash", "role"]),
    st.lists(st.sampled_from(["msg_1", "msg_2", 3, None]), max_size=3),
    st.fixed_dictionaries({}, optional={"type": st.sampled_from(["mention", "x y", ""]), "value": st.text(max_size=3)}),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sample_dicts()),
    st.dictionaries(
        st.sampled_from(
            sorted(
                {k for d in sample_dicts() for k in d}
                | {"ack", "ack_within", "via", "invite", "since", "from_event", "name", "x"}
            )
        ),
        _value,
        max_size=3,
    ),
    st.sets(st.sampled_from(["body", "scopes", "refs", "message_ids", "agent_id", "v", "chain", "sig"]), max_size=2),
)
def test_generated_events_get_the_same_answer_from_the_fast_and_the_general_path(d, changes, removed):
    event = {k: v for k, v in {**d, **changes}.items() if k not in removed}
    try:
        line = orjson.dumps(event)
    except TypeError:  # an integer orjson cannot write
        line = json.dumps(event).encode()
    fast, checked = both(line)
    if checked == "refused":
        assert fast == "refused"
    elif fast != "refused":
        assert fast == checked


@pytest.mark.parametrize("line", corpus()[::197] + RAW_LINES)
def test_decode_line_is_the_general_path_whichever_decides(line):
    try:
        expected: object = codec.decode_checked(line)
    except ev.MalformedEvent:
        expected = "refused"
    try:
        got: object = ev.decode_line(line)
    except ev.MalformedEvent:
        got = "refused"
    assert got == expected
