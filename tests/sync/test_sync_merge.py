"""The pure per-shard merge: examples and hypothesis properties."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from thrum.sync.merge import MAX_DEPTH, MergeResult, event_key, merge_shard, split_lines


def ev(event_id: str, body: str = "x") -> bytes:
    return json.dumps({"type": "message.create", "event_id": event_id, "body": body}).encode()


def shard(*lines: bytes, torn: bool = False) -> bytes:
    data = b"".join(line + b"\n" for line in lines)
    return data[:-1] if torn else data


# --- event_key ------------------------------------------------------------------------


def test_event_key_valid_event_is_its_event_id():
    assert event_key(ev("01HQ") + b"\n") == b"01HQ"


def test_event_key_unicode_event_id_is_utf8():
    assert event_key(json.dumps({"event_id": "é"}).encode()) == "é".encode()


def test_event_key_malformed_line_is_the_stripped_line():
    assert event_key(b'  {"event_id": "01HQ", "ty  \n') == b'{"event_id": "01HQ", "ty'
    assert event_key(b"garbage") == b"garbage"


def test_event_key_non_string_event_id_or_non_object_is_the_line():
    assert event_key(b'{"event_id": 7}') == b'{"event_id": 7}'
    assert event_key(b'["event_id", "x"]') == b'["event_id", "x"]'
    assert event_key(b"{}") == b"{}"


def test_event_key_invalid_utf8_and_deep_nesting_do_not_raise():
    assert event_key(b'{"event_id": "\xff"}') == b'{"event_id": "\xff"}'
    deep = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert event_key(deep) == deep


# --- merge_shard examples ----------------------------------------------------------------


def test_merge_shard_remote_first_then_local_extras():
    remote = shard(ev("A"), ev("B"))
    local = shard(ev("A"), ev("C"))
    result = merge_shard(remote, local)
    assert result == MergeResult(
        data=shard(ev("A"), ev("B"), ev("C")),
        received=[ev("B") + b"\n"],
        sent=[ev("C") + b"\n"],
    )


def test_merge_shard_same_event_id_different_bytes_keeps_remote_copy():
    result = merge_shard(shard(ev("A", "remote")), shard(ev("A", "local")))
    assert result.data == shard(ev("A", "remote"))
    assert result.received == [] and result.sent == []


def test_merge_shard_duplicates_dropped_first_occurrence_kept():
    remote = shard(ev("A", "1"), ev("A", "2"), b"junk", b"junk")
    local = shard(ev("B"), ev("B", "again"))
    assert merge_shard(remote, local).data == shard(ev("A", "1"), b"junk", ev("B"))


def test_merge_shard_torn_local_last_line_is_kept_and_terminated():
    local = shard(ev("A"), b'{"event_id": "B", "ty', torn=True)
    result = merge_shard(b"", local)
    assert result.data == shard(ev("A"), b'{"event_id": "B", "ty')
    assert result.sent[-1] == b'{"event_id": "B", "ty\n'


def test_merge_shard_torn_remote_last_line_is_terminated_before_local_lines():
    remote = shard(ev("A"), b"torn", torn=True)
    result = merge_shard(remote, shard(ev("B")))
    assert result.data == shard(ev("A"), b"torn", ev("B"))


def test_merge_shard_malformed_lines_survive_on_both_sides():
    result = merge_shard(shard(b"not json", b"{broken"), shard(b"[1, 2]", b"\xff\xfe"))
    assert split_lines(result.data) == [b"not json", b"{broken", b"[1, 2]", b"\xff\xfe"]


def test_merge_shard_blank_lines_dropped_crlf_content_kept():
    remote = b"\n\n" + ev("A") + b"\r\n   \n"
    result = merge_shard(remote, b"\n")
    assert result.data == ev("A") + b"\r\n"


def test_merge_shard_empty_inputs():
    assert merge_shard(b"", b"") == MergeResult(b"", [], [])


def test_merge_shard_identical_sides_nothing_moves():
    data = shard(ev("A"), ev("B"))
    assert merge_shard(data, data) == MergeResult(data, [], [])


# --- properties ---------------------------------------------------------------------------

_ids = st.sampled_from(["A", "B", "C", "D", "E", "F", "01HQ", "é", 'q"uote', "back\\slash"])

_event_line = st.builds(
    lambda i, body, ascii_: json.dumps({"event_id": i, "b": body}, ensure_ascii=ascii_).encode("utf-8"),
    _ids, st.sampled_from(["", "x", "y", "line\nbreak"]), st.booleans(),
)
_junk_line = st.binary(max_size=12).filter(lambda b: b"\n" not in b)
_torn_line = _event_line.map(lambda b: b[: max(1, len(b) // 2)])
_blank = st.sampled_from([b"", b"  ", b"\r", b"\t"])
_line = st.one_of(_event_line, _event_line, _event_line, _junk_line, _torn_line, _blank)


@st.composite
def shards(draw) -> bytes:
    lines = draw(st.lists(_line, max_size=10))
    data = b"\n".join(lines)
    if lines and draw(st.booleans()):
        data += b"\n"
    return data


def keyset(data: bytes) -> set[bytes]:
    return {event_key(line) for line in split_lines(data)}


def check_well_formed(data: bytes) -> None:
    assert data == b"" or data.endswith(b"\n")
    lines = split_lines(data)
    assert data == b"".join(line + b"\n" for line in lines), "blank line or missing newline"
    keys = [event_key(line) for line in lines]
    assert len(keys) == len(set(keys)), "duplicate key"


@settings(max_examples=300, deadline=None)
@given(shards(), shards())
def test_merge_shard_loses_and_duplicates_nothing(remote, local):
    result = merge_shard(remote, local)
    check_well_formed(result.data)
    assert keyset(result.data) == keyset(remote) | keyset(local)
    # the remote comes first, as it is (minus blanks and repeated keys)
    assert result.data.startswith(merge_shard(remote, b"").data)
    assert {event_key(x) for x in result.received} == keyset(remote) - keyset(local)
    assert {event_key(x) for x in result.sent} == keyset(local) - keyset(remote)
    assert result.data.endswith(b"".join(result.sent))


@settings(max_examples=300, deadline=None)
@given(shards(), shards())
def test_merge_shard_is_idempotent(remote, local):
    first = merge_shard(remote, local)
    again = merge_shard(remote, first.data)
    assert again.data == first.data
    assert again.received == []
    assert again.sent == first.sent
    assert merge_shard(first.data, first.data) == MergeResult(first.data, [], [])


@settings(max_examples=300, deadline=None)
@given(shards(), shards(), shards())
def test_merge_shard_replicas_converge(remote, local_a, local_b):
    # A merges and pushes; B merges on top of A's push and pushes; A merges again.
    pushed_a = merge_shard(remote, local_a).data
    pushed_b = merge_shard(pushed_a, local_b).data
    final_a = merge_shard(pushed_b, pushed_a).data
    final_b = merge_shard(pushed_b, pushed_b).data
    assert final_a == final_b == pushed_b
    assert keyset(final_a) == keyset(remote) | keyset(local_a) | keyset(local_b)


@settings(max_examples=200, deadline=None)
@given(shards(), shards(), shards())
def test_merge_shard_same_remote_same_events_same_bytes(remote, local_a, local_b):
    # Two replicas that hold the same events (in any order) merge to identical bytes.
    a = merge_shard(remote, local_a + b"\n" + local_b).data
    b = merge_shard(remote, merge_shard(remote, local_a).data + b"\n" + local_b).data
    assert keyset(a) == keyset(b)
    assert merge_shard(a, b).data == a


# --- event_key: one meaning whichever JSON parser is installed ----------------------------


def reference_key(line: bytes) -> bytes:
    """The rule, stdlib only: valid JSON object (nesting <= MAX_DEPTH) with a str event_id."""
    s = line.strip()
    depth = deepest = 0
    in_string = escaped = False
    for c in s.decode("latin-1"):
        if in_string:
            escaped, in_string = (False, True) if escaped else (c == "\\", c != '"')
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    if not s.startswith(b"{") or deepest > MAX_DEPTH:
        return s
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return s
    if isinstance(obj, dict) and isinstance(obj.get("event_id"), str):
        return obj["event_id"].encode("utf-8", "surrogatepass")
    return s


def nested(depth: int) -> bytes:
    return b'{"event_id": "N", "x": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def test_event_key_nesting_limit_is_exact():
    assert event_key(nested(MAX_DEPTH)) == b"N"
    assert event_key(nested(MAX_DEPTH + 1)) == nested(MAX_DEPTH + 1)
    # brackets inside strings do not count
    assert event_key(json.dumps({"event_id": "S", "t": "[" * 500}).encode()) == b"S"


_quirks = st.sampled_from([
    b'{"event_id": "A", "n": NaN}',
    b'{"event_id": "A", "n": 1e999}',
    b'{"event_id": "A", "n": 123456789012345678901234567890}',
    b'{"event_id": "\\ud800"}',
    b'{"event_id": "A", "event_id": "B"}',
    b'\xef\xbb\xbf{"event_id": "A"}',
    b'{"event_id": "A\tB"}',
    b'{"event_id": "\xed\xa0\x80"}',
    b'{"event_id": "A"}\r',
    nested(MAX_DEPTH),
    nested(MAX_DEPTH + 1),
])


@settings(max_examples=300, deadline=None)
@given(st.one_of(_quirks, _event_line, _junk_line, _torn_line, st.binary(max_size=40)))
def test_event_key_matches_the_stdlib_reference(line):
    assert event_key(line) == reference_key(line)
