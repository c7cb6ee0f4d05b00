"""The pure per-shard merge: examples and hypothesis properties."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thrum.sync.merge.shard import MAX_DEPTH, NOT_AN_EVENT, MergeResult, event_key, merge_shard, split_lines

J = NOT_AN_EVENT  # the key of a line that is not an event starts with it


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
    assert event_key(b'  {"event_id": "01HQ", "ty  \n') == J + b'{"event_id": "01HQ", "ty'
    assert event_key(b"garbage") == J + b"garbage"


def test_event_key_non_string_event_id_or_non_object_is_the_line():
    assert event_key(b'{"event_id": 7}') == J + b'{"event_id": 7}'
    assert event_key(b'["event_id", "x"]') == J + b'["event_id", "x"]'
    assert event_key(b"{}") == J + b"{}"


def test_event_key_invalid_utf8_and_deep_nesting_do_not_raise():
    assert event_key(b'{"event_id": "\xff"}') == J + b'{"event_id": "\xff"}'
    deep = b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert event_key(deep) == J + deep


def test_event_key_of_a_signed_line_names_its_signer():
    line = json.dumps({"event_id": "01HQ", "sig": {"by": "alice", "ed25519": "x"}}).encode()
    assert event_key(line) == b"01HQ\0alice"
    assert event_key(json.dumps({"event_id": "01HQ", "sig": {"by": 7}}).encode()) == b"01HQ"
    assert event_key(json.dumps({"event_id": "01HQ", "sig": "alice"}).encode()) == b"01HQ"


def test_a_junk_line_never_takes_the_key_of_an_event():
    # A line that is just an event id (or id and signer) must not displace that event.
    for junk in (b"01HQ", b"01HQ\0alice"):
        real = json.dumps({"event_id": "01HQ", "sig": {"by": "alice"}}).encode() if b"\0" in junk else ev("01HQ")
        result = merge_shard(shard(junk), shard(real))
        assert result.data == shard(junk, real)


def test_another_signer_reusing_an_event_id_never_displaces_the_original():
    original = json.dumps({"event_id": "E", "body": "mine", "sig": {"by": "alice"}}).encode()
    reuse = json.dumps({"event_id": "E", "body": "yours", "sig": {"by": "mallory"}}).encode()
    result = merge_shard(shard(reuse), shard(original))
    assert result.data == shard(reuse, original)
    assert result.sent == [original + b"\n"]


def test_prefer_chooses_between_two_copies_of_one_key():
    remote = shard(ev("A", "tampered"), ev("B"))
    local = shard(ev("A", "original"), ev("C"))
    calls = []

    def keep_local(theirs, ours):
        calls.append((theirs, ours))
        return ours

    result = merge_shard(remote, local, prefer=keep_local)
    assert calls == [(ev("A", "tampered"), ev("A", "original"))]
    assert result.data == shard(ev("A", "original"), ev("B"), ev("C"))
    assert result.received == [ev("B") + b"\n"]  # our copy stays: nothing new under A
    assert result.sent == [ev("A", "original") + b"\n", ev("C") + b"\n"]
    assert merge_shard(remote, local, prefer=lambda theirs, ours: theirs) == merge_shard(remote, local)
    with pytest.raises(ValueError):
        merge_shard(remote, local, prefer=lambda theirs, ours: b"something else")


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
    # the remote's copy is new here: folded like any line received (issue 31, finding 5)
    assert result.received == [ev("A", "remote") + b"\n"] and result.sent == []


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


def _event(i: str, body: str, ascii_: bool, signer: str | None) -> bytes:
    obj: dict = {"event_id": i, "b": body}
    if signer is not None:
        obj["sig"] = {"by": signer, "ed25519": "AAAA"}
    return json.dumps(obj, ensure_ascii=ascii_).encode("utf-8")


_event_line = st.builds(
    _event,
    _ids,
    st.sampled_from(["", "x", "y", "line\nbreak"]),
    st.booleans(),
    st.sampled_from([None, None, "alice", "bob"]),
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
    # received: keys new here, and keys whose remote copy replaced a different one of ours
    replaced = {k for k, line in _first(remote).items() if _first(local).get(k, line) != line}
    assert {event_key(x) for x in result.received} == (keyset(remote) - keyset(local)) | replaced
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


def _prefer_smaller(remote_line: bytes, local_line: bytes) -> bytes:
    """A resolver as the trust layer's: pure, and it may keep either copy."""
    return min(remote_line, local_line)


def _first(data: bytes) -> dict:
    """Key -> the first line holding it."""
    out: dict = {}
    for line in split_lines(data):
        out.setdefault(event_key(line), line)
    return out


@settings(max_examples=300, deadline=None)
@given(shards(), shards())
def test_merge_shard_with_a_resolver_loses_nothing_and_keeps_its_choice(remote, local):
    result = merge_shard(remote, local, prefer=_prefer_smaller)
    check_well_formed(result.data)
    assert keyset(result.data) == keyset(remote) | keyset(local)
    kept = {event_key(line): line for line in split_lines(result.data)}
    first_remote, first_local = _first(remote), _first(local)
    replaced = {k for k in first_remote.keys() & first_local.keys() if kept[k] != first_local[k]}
    assert {event_key(x) for x in result.received} == (keyset(remote) - keyset(local)) | replaced
    for k in first_remote.keys() & first_local.keys():
        assert kept[k] == min(first_remote[k], first_local[k])
    again = merge_shard(remote, result.data, prefer=_prefer_smaller)
    assert again.data == result.data and again.received == []


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
        return J + s
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        return J + s
    if isinstance(obj, dict) and isinstance(obj.get("event_id"), str):
        key = obj["event_id"]
        sig = obj.get("sig")
        if isinstance(sig, dict) and isinstance(sig.get("by"), str):
            key += "\0" + sig["by"]
        return key.encode("utf-8", "surrogatepass")
    return J + s


def nested(depth: int) -> bytes:
    return b'{"event_id": "N", "x": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"


def test_event_key_nesting_limit_is_exact():
    assert event_key(nested(MAX_DEPTH)) == b"N"
    assert event_key(nested(MAX_DEPTH + 1)) == J + nested(MAX_DEPTH + 1)
    # brackets inside strings do not count
    assert event_key(json.dumps({"event_id": "S", "t": "[" * 500}).encode()) == b"S"


_quirks = st.sampled_from(
    [
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
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_quirks, _event_line, _junk_line, _torn_line, st.binary(max_size=40)))
def test_event_key_matches_the_stdlib_reference(line):
    assert event_key(line) == reference_key(line)


# --- the fast path: one side is a line-aligned prefix of the other ------------------------

from thrum.sync.merge.shard import ShardKeys, merge_shard_fast, merge_shard_keyed, shard_keys  # noqa: E402


def check_fast(remote: bytes, local: bytes, known: ShardKeys | None = None):
    """merge_shard_fast is None or exactly merge_shard, with a true summary of its bytes."""
    expected = merge_shard(remote, local)
    fast = merge_shard_fast(remote, local, known)
    if fast is None:
        return None
    result, keys = fast
    assert result == expected
    assert keys.size == len(result.data) and keys.clean
    for line in split_lines(result.data):
        assert hash(event_key(line)) in keys
    assert len(keys) == len(split_lines(result.data))
    return result


def test_fast_remote_appended_received_are_the_new_lines_and_data_is_the_remote():
    local = shard(ev("A"), ev("B"))
    remote = local + shard(ev("C"), ev("D"))
    result = check_fast(remote, local)
    assert result.received == [ev("C") + b"\n", ev("D") + b"\n"] and result.sent == []
    assert result.data is remote  # no copy of the shard


def test_fast_local_appended_sent_are_our_new_lines():
    remote = shard(ev("A"))
    local = remote + shard(ev("B"), ev("C"))
    result = check_fast(remote, local)
    assert result.received == [] and result.sent == [ev("B") + b"\n", ev("C") + b"\n"]
    assert result.data == local


def test_fast_path_does_not_apply_when_both_sides_appended():
    base = shard(ev("A"))
    assert merge_shard_fast(base + shard(ev("R")), base + shard(ev("L"))) is None


def test_fast_path_does_not_apply_to_a_torn_local_last_line():
    # the torn bytes are the start of a remote line: merge_shard keeps them as a line
    remote = shard(ev("A"), ev("B"))
    local = remote[: len(ev("A")) + 5]
    assert merge_shard_fast(remote, local) is None
    assert merge_shard(remote, local).sent == [local[len(ev("A")) + 1 :] + b"\n"]


def test_fast_path_torn_remote_tail_and_torn_local_tail_match_the_merge():
    local = shard(ev("A"))
    assert check_fast(local + b'{"event_id": "T", "ty', local).received == [b'{"event_id": "T", "ty\n']
    remote = shard(ev("A"))
    assert check_fast(remote, remote + b'{"event_id": "T", "ty').sent == [b'{"event_id": "T", "ty\n']


def test_fast_path_gives_up_on_a_remote_line_repeating_a_local_key():
    local = shard(ev("A"), ev("B"))
    remote = local + shard(ev("A", "again"), ev("C"))
    assert merge_shard_fast(remote, local) is None
    assert merge_shard(remote, local).received == [ev("C") + b"\n"]


def test_fast_path_drops_a_key_repeated_inside_the_new_lines_like_the_merge():
    local = shard(ev("A"))
    remote = local + shard(ev("C"), ev("C", "dup"), b"junk", b"junk")
    result = check_fast(remote, local)
    assert result.received == [ev("C") + b"\n", b"junk\n"]


def test_fast_path_gives_up_on_duplicate_or_blank_lines_in_the_common_prefix():
    dup = shard(ev("A"), ev("A", "dup"))
    assert merge_shard_fast(dup + shard(ev("B")), dup) is None
    blank = shard(ev("A")) + b"  \n"
    assert merge_shard_fast(blank + shard(ev("B")), blank) is None
    assert merge_shard_fast(blank, blank + shard(ev("B"))) is None


def test_fast_path_identical_and_empty_sides():
    data = shard(ev("A"), ev("B"))
    assert check_fast(data, data) == MergeResult(data, [], [])
    assert check_fast(data, b"").received == [ev("A") + b"\n", ev("B") + b"\n"]
    assert check_fast(b"", data).sent == [ev("A") + b"\n", ev("B") + b"\n"]
    assert check_fast(b"", b"") == MergeResult(b"", [], [])


def test_fast_path_uses_a_known_summary_and_leaves_it_unchanged():
    old = shard(*(ev(f"K{i}") for i in range(50)))
    known = shard_keys(old)
    local = old + shard(ev("L1"))
    remote = local + shard(ev("R1"))
    before = (known.size, len(known))
    result, keys = merge_shard_fast(remote, local, known)
    assert result == merge_shard(remote, local)
    assert (known.size, len(known)) == before and keys.size == len(remote) and len(keys) == 52


def test_fast_path_rejects_a_summary_that_is_not_a_line_aligned_prefix():
    local = shard(ev("A"), ev("B"))
    bad = shard_keys(shard(ev("A"), ev("B"), ev("C")))
    with pytest.raises(ValueError):
        merge_shard_fast(local, local, bad)


def test_shard_keys_incremental_equals_whole_and_consolidates():
    lines = [ev(f"E{i:05d}") for i in range(ShardKeys._CONSOLIDATE * 2 + 10)]
    data = shard(*lines)
    whole = shard_keys(data)
    step = ShardKeys()
    for cut in (100, 5000, 5001, len(lines)):
        step.extend(shard(*lines[:cut]))
    assert whole.size == step.size == len(data) and whole.clean and step.clean
    assert len(whole) == len(step) == len(lines)
    assert all(hash(event_key(line)) in step for line in lines[::97])
    assert hash(b"nope") not in step
    assert not shard_keys(data + shard(lines[3])).clean


def test_merge_shard_keyed_summarises_the_result():
    result, keys = merge_shard_keyed(shard(ev("A"), ev("A")), shard(ev("B")))
    assert result == merge_shard(shard(ev("A"), ev("A")), shard(ev("B")))
    assert keys.clean and keys.size == len(result.data) and len(keys) == 2


@st.composite
def prefix_pairs(draw):
    """(remote, local, cut): one side the other plus lines, and a line-aligned cut of local."""
    base = draw(shards())
    if base and not base.endswith(b"\n") and draw(st.booleans()):
        base += b"\n"
    extra = draw(shards())
    longer = base + extra if base.endswith(b"\n") or not base else base + b"\n" + extra
    if draw(st.booleans()):
        remote, local = longer, base
    else:
        remote, local = base, longer
    if draw(st.integers(0, 9)) == 0:
        remote, local = draw(shards()), draw(shards())  # unrelated sides too
    ends = [0] + [i + 1 for i, b in enumerate(local) if b == 0x0A]
    cut = draw(st.sampled_from(ends))
    return remote, local, cut


@settings(max_examples=500, deadline=None)
@given(prefix_pairs(), st.booleans())
def test_fast_path_equals_the_merge_whenever_it_answers(pair, use_known):
    remote, local, cut = pair
    known = shard_keys(local[:cut]) if use_known else None
    check_fast(remote, local, known)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["A", "B", "C", "D", "E", "F", "G"]), unique=True, max_size=7),
    st.integers(0, 7),
    st.booleans(),
)
def test_fast_path_answers_for_clean_appends(ids, split, remote_longer):
    lines = [ev(i) for i in ids]
    split = min(split, len(lines))
    short, long_ = shard(*lines[:split]), shard(*lines)
    remote, local = (long_, short) if remote_longer else (short, long_)
    assert check_fast(remote, local) is not None
