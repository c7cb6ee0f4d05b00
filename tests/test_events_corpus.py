"""What the log reader accepts and refuses, pinned: a corpus of malformed lines against the
answers today's validation gave (recorded in tests/events_corpus_answers.txt).

The corpus is every event type's sample with each field (and each field of its body,
chain and tags) replaced by each bad value, or removed, plus lines that are not events
at all: ~54,000 lines. Each line's answer is the normalised event it decodes to, or
"refused"; apart from that, the error message word for word. Answers are recorded per
group (one sample, one field) as counts and digests, so the file stays small and a
change shows which group moved. The answers were recorded on 2026-11-27 with the hand-written checks
(``validation.py``, ``fields.py``) before the schema became the one declaration; the
schema must give every line the same answer. One answer moved on purpose: a plain
``message.create`` authored by a reserved name (``everyone``, ``daemon``) is refused; the
hand-written fast path for plain messages checked only the name's pattern and took it,
although the rule (and the same checks for any other line) refuses it.

A deliberate change (a new field, a better-worded error) is recorded again with
``python tests/test_events_corpus.py --record`` and shows in the diff of the answers file:
the third column is what is accepted, the fourth how refusals are worded.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson

from thrum import events as ev

ANSWERS = Path(__file__).with_name("events_corpus_answers.txt")

BODY = {"format": "markdown", "content": "Auth module **done**", "structured": '{"passed": 45}'}
ENVELOPE = {"timestamp": "2026-11-27T10:00:00.000Z", "event_id": "01JDQ0000000000000000000A1", "v": 1}
KEY_A, KEY_B = "A" * 43 + "=", "B" * 43 + "="

# One sample per event type (two for those with alternatives), as the write path writes them.
SAMPLES: list[dict] = [
    {
        "type": "message.create",
        "message_id": "msg_01JDQ0000000000000000000M1",
        "thread_id": "thr_x1",
        "agent_id": "furiosa",
        "session_id": "ses_01ABC",
        "body": BODY,
        "scopes": [{"type": "module", "value": "auth"}],
        "refs": [{"type": "mention", "value": "reviewer"}, {"type": "issue", "value": "b-42"}],
        "priority": "high",
        "authored_by": "max",
        "disclosed": True,
        "subject": "Auth",
        "idempotency_key": "k-1",
    },
    {
        "type": "message.create",
        "message_id": "msg_01JDQ0000000000000000000M2",
        "agent_id": "furiosa",
        "session_id": "ses_01ABC",
        "body": {"format": "plain", "content": "ack me", "structured": ""},
        "ack": True,
        "ack_within": 600,
    },
    {  # a plain message: no structured body, no ack (the hand-written checks had a fast path for these)
        "type": "message.create",
        "message_id": "msg_01JDQ0000000000000000000M3",
        "agent_id": "furiosa",
        "session_id": "ses_01ABC",
        "body": {"format": "markdown", "content": "plain", "structured": ""},
        "scopes": [],
        "refs": [{"type": "mention", "value": "nux"}],
        "priority": "normal",
    },
    {
        "type": "message.edit",
        "message_id": "msg_01ABC",
        "agent_id": "furiosa",
        "session_id": "ses_01ABC",
        "body": BODY,
        "idempotency_key": "k-2",
    },
    {
        "type": "message.delete",
        "message_id": "msg_01ABC",
        "agent_id": "furiosa",
        "session_id": "ses_01ABC",
        "reason": "spam",
    },
    {"type": "thread.create", "thread_id": "thr_01JDQ", "title": "Feature X", "created_by": "furiosa"},
    {
        "type": "agent.register",
        "agent_id": "furiosa",
        "kind": "user",
        "name": "furiosa",
        "role": "implementer",
        "module": "auth",
        "worktree": "main",
        "display": "Furiosa",
        "public_key": KEY_A,
        "invite": {"key": KEY_B, "sig": "C" * 86 + "=="},
    },
    {"type": "agent.update", "agent_id": "furiosa", "work_contexts": [{"session_id": "ses_1", "branch": "main"}]},
    {"type": "agent.heartbeat", "agent_id": "nux"},
    {"type": "agent.cleanup", "agent_id": "furiosa", "reason": "manual deletion", "method": "ui", "by": "max"},
    {"type": "agent.session.start", "session_id": "ses_01JDQ", "agent_id": "furiosa"},
    {"type": "agent.session.end", "session_id": "ses_01ABC", "agent_id": "furiosa", "reason": "crash"},
    {"type": "agent.admit", "agent_id": "nux", "by": "furiosa", "public_key": KEY_A},
    {"type": "agent.admit", "agent_id": "nux", "by": "furiosa", "invite": KEY_B},
    {"type": "agent.rotate", "agent_id": "nux", "public_key": KEY_A, "old_key": KEY_B},
    {
        "type": "agent.revoke",
        "agent_id": "nux",
        "by": "furiosa",
        "public_key": KEY_A,
        "reason": "lost laptop",
        "since": "2026-11-27T10:00:00.000Z",
    },
    {"type": "agent.revoke", "agent_id": "nux", "by": "nux", "public_key": KEY_A, "from_event": ENVELOPE["event_id"]},
    {
        "type": "group.create",
        "group_id": "grp_01JDQ",
        "name": "backend",
        "description": "Backend team",
        "created_by": "furiosa",
    },
    {"type": "group.delete", "name": "backend", "deleted_by": "furiosa"},
    {
        "type": "group.member.add",
        "group": "backend",
        "member_type": "role",
        "member_value": "reviewer",
        "agent_id": "furiosa",
    },
    {"type": "group.member.remove", "group": "backend", "member_value": "nux", "agent_id": "furiosa"},
    {"type": "message.read", "agent_id": "nux", "session_id": "ses_2", "message_ids": ["msg_1", "msg_2"]},
    {"type": "message.unread", "agent_id": "nux", "message_ids": ["msg_1"]},
    {"type": "message.archive", "agent_id": "nux", "message_ids": ["msg_2", "msg_3"]},
    {"type": "message.delivered", "agent_id": "nux", "message_ids": ["msg_1", "msg_2"]},
    {
        "type": "message.surfaced",
        "agent_id": "nux",
        "session_id": "ses_2",
        "message_ids": ["msg_1"],
        "via": "hook claude Stop",
    },
    {"type": "message.acked", "agent_id": "nux", "message_ids": ["msg_1", "msg_1"]},
]
SAMPLES = [{"type": d["type"], **ENVELOPE, **{k: v for k, v in d.items() if k != "type"}} for d in SAMPLES]

SIGNED = {
    "chain": {"seq": 2, "prev": "B" * 22, "log": "team:main"},
    "sig": {"by": "furiosa", "ed25519": "A" * 86 + "=="},
}

BAD_VALUES: list[object] = [
    None,
    0,
    1,
    -1,
    1.5,
    True,
    False,
    "",
    " ",
    "x" * 5000,
    "BAD ID",
    "everyone",
    "daemon",
    "msg_",
    "msg_a\n",
    "ses_ok\n",
    "alice\n",
    "Alice",
    "é",
    "furiosa",
    "2026-11-27T10:00:00.000Z",
    [],
    [None],
    ["msg_1", 2],
    ["msg_1"],
    {},
    {"type": "mention"},
    {"type": "", "value": "x"},
    {"type": "bad type", "value": "x"},
    {"type": "mention", "value": ""},
    {"seq": 1},
    {"seq": 1, "prev": "A" * 22},
    {"seq": 2},
    {"seq": 0},
    {"seq": True},
    {"seq": 2**53, "prev": "A" * 22},
    {"seq": 1, "log": ""},
    {"seq": 1, "log": None},
    {"seq": 1, "x": 1},
    {"key": KEY_A},
    {"key": KEY_A, "sig": "s", "x": 1},
    {"content": 5},
    {"format": "html", "content": ""},
    {"content": "", "structured": "{not json"},
    {"content": "", "structured": 0},
    "2026-02-30T10:00:00Z",
    "2100-01-01T00:00:00Z",
    "2026-11-25T22:19:15+02:00",
    "2026-11-25T22:19:60Z",
    "2024-02-29T00:00:00Z",
    "2026-02-29T00:00:00Z",
    "01JD0000000000000000000000",
    "81JD0000000000000000000000",
    2**64,
]

EXTRA_KEYS = ["ack", "ack_within", "idempotency_key", "invite", "via", "since", "from_event", "name", "v", "x"]

RAW_LINES = [
    b"",
    b"null",
    b"[]",
    b"[1, 2]",
    b'"message.create"',
    b"{",
    b"{oops",
    b'{"type": "message.read"}',
    b"{}" * 2,
    b"[" * 5000 + b"]" * 5000,
    b'{"type":"message.read","sig":' + b"[" * 200 + b"]" * 200 + b"}",
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"bob","message_ids":["msg_1"],"x":NaN}',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"bo\\ud800b","message_ids":["msg_1"]}',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"bob","message_ids":["msg_1"],"sig":"\xed\xa0\x80"}',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"bob","message_ids":["msg_1"]}\xff',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"bob","agent_id":"b!","message_ids":["msg_1"]}',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"b!","agent_id":"bob","message_ids":["msg_1"]}',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"ann","agent_id":"bob","message_ids":["msg_1"],"sig":{"a":1e400}}',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"bob","message_ids":["msg_1"],"v":1.0}',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"agent_id":"bob","message_ids":["msg_1"],"v":18446744073709551617}',
    b'{"type":"task.assign","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"task":{"id":7}}',
    b'{"type":"message.read","timestamp":"2026-01-01T00:00:00.000Z","event_id":"01KDVEBRYZ0000055K7K5PN59C",'
    b'"v":2,"message_ids":5}',
]


def _dumps(d: dict) -> bytes:
    try:
        return orjson.dumps(d)
    except TypeError:  # an integer orjson cannot write
        return json.dumps(d).encode()


def groups() -> Iterator[tuple[str, list[bytes]]]:
    """(group name, its lines): every sample, unsigned and signed, each key changed or removed."""
    for i, sample in enumerate(SAMPLES):
        for signed, d in ((False, sample), (True, {**sample, **SIGNED})):
            name = f"{i:02d} {d['type']}{' signed' if signed else ''}"
            keys = list(d) + [k for k in EXTRA_KEYS if k not in d]
            for key in keys:
                lines = [_dumps({k: v for k, v in d.items() if k != key})]
                lines += [_dumps({**d, key: bad}) for bad in BAD_VALUES]
                yield f"{name} {key}", lines
            for key in ("content", "format", "structured", "x"):
                if "body" in d and not signed:
                    yield f"{name} body.{key}", [_dumps({**d, "body": {**d["body"], key: bad}}) for bad in BAD_VALUES]
            for key in ("scopes", "refs"):
                if d.get(key) and not signed:
                    lines = [_dumps({**d, key: [*d[key], bad]}) for bad in BAD_VALUES]
                    lines.append(_dumps({**d, key: d[key] * 2}))  # repeats are dropped
                    yield f"{name} {key}[]", lines
            if signed:
                for key in ("seq", "prev", "log"):
                    lines = [_dumps({**d, "chain": {k: v for k, v in d["chain"].items() if k != key}})]
                    lines += [_dumps({**d, "chain": {**d["chain"], key: bad}}) for bad in BAD_VALUES]
                    yield f"{name} chain.{key}", lines
    yield "raw lines", RAW_LINES


def answer(line: bytes) -> tuple[str, str]:
    """The normalised event a line decodes to, or "refused"; and the same with the error message."""
    try:
        ok = "ok " + json.dumps(ev.decode_line(line), ensure_ascii=False)  # in its order
        return ok, ok
    except ev.MalformedEvent as exc:
        return "refused", "refused " + str(exc)


def _digest(got: list[str]) -> str:
    return hashlib.sha256("\n".join(got).encode()).hexdigest()[:16]


def answers() -> dict[str, str]:
    """Each group's answers: how many lines were taken and refused, a digest of them all,
    and a digest of the error messages word for word."""
    out = {}
    for name, lines in groups():
        got = [answer(line) for line in lines]
        taken = sum(a.startswith("ok ") for a, _ in got)
        short, words = _digest([a for a, _ in got]), _digest([w for _, w in got])
        out[name] = f"{taken} taken {len(got) - taken} refused {short} {words}"
    return out


def recorded() -> dict[str, str]:
    out = {}
    for row in ANSWERS.read_text().splitlines():
        if row and not row.startswith("#"):
            name, _, rest = row.partition("\t")
            out[name] = rest
    return out


def _moved(columns: slice) -> list[str]:
    now, then = answers(), recorded()
    names = sorted(set(now) | set(then))
    cut = {
        name: (" ".join(now.get(name, "").split()[columns]), " ".join(then.get(name, "").split()[columns]))
        for name in names
    }
    return [f"{name}: now {a!r}, recorded {b!r}" for name, (a, b) in cut.items() if a != b]


def test_every_line_of_the_corpus_gets_the_answer_recorded_before_the_schema_took_over():
    """Taken or refused, and the same normalised event when taken."""
    moved = _moved(slice(0, 5))
    assert not moved, "\n".join(moved[:40])


def test_every_refusal_is_worded_as_recorded():
    """The one-line errors users see (a reworded one is recorded again, and shows in the diff)."""
    moved = _moved(slice(5, 6))
    assert not moved, f"{len(moved)} groups worded differently:\n" + "\n".join(moved[:40])


def test_the_corpus_reaches_both_answers_many_times():
    """Not vacuous: thousands of lines refused, hundreds taken, for every event type."""
    totals = [tuple(int(x) for x in a.split()[0:3:2]) for a in recorded().values()]
    assert sum(t for t, _ in totals) > 1000 and sum(r for _, r in totals) > 10_000
    assert {name.split()[1] for name in recorded() if name != "raw lines"} >= set(ev.EVENT_TYPES)


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/test_events_corpus.py --record")
    rows = ["# group\ttaken, refused, digest of the answers, of the error messages (test_events_corpus.py --record)"]
    rows += [f"{name}\t{a}" for name, a in answers().items()]
    ANSWERS.write_text("\n".join(rows) + "\n")
    print(f"recorded {len(rows) - 1} groups in {ANSWERS}")
