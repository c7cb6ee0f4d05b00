"""The trust check of a large rebuild in a second process: the folding process no longer pays it.

A rebuild's load reads, decodes, judges and folds each batch, all of it on one core;
judging (`verified.VerifiedFold`, `thrum.trust.verify`) is about 7 % of it when the
verdicts are remembered and ~5.5 µs a line more when they are not (a first rebuild).

Rules:

1. The second process (``python -m thrum.store.judge_process``, never a fork of the
   daemon) is told where the fold's state is kept — the ring's keys, the team facts, the
   verdict memory, the local identities — and what is in no file (the root, the log id,
   the skew, the bounds: `VerifiedFold.apart_state`); it builds its own fold from that,
   as a daemon does at a start.
2. It reads the log itself, in the batches the rebuild reads (`readahead.log_batches`,
   the same sizes), judges each as the rebuild's fold would (`VerifiedFold.judge_ahead`),
   and sends the `verified.Ruling` of each: the accepted lines as their places in the
   batch, the refusals, the lines dated ahead, the retirements, the waiting lines let go
   of. Decoded events never cross: the rebuild decodes each batch itself for its fold
   (a reader process shipping events lost: docs/design/decisions.md, "A reader process").
3. It stops after the log's last batch, or after the first batch holding a line dated
   ahead: from there on the held lines can come due, which only the database knows, so
   the rest is judged with the fold (as `judge_ahead` does). Before it stops it writes
   what it learned to the fold's files (keys, facts, verdict memory: written as it goes)
   and sends the lines still waiting; the rebuild's fold takes that over (`VerifiedFold.adopt`).
4. Its output is checked, never trusted blindly: the framing, every field's type, every
   place inside its batch, and each batch's size and end positions against the batch
   this process read. A process that cannot start, dies, says something malformed or
   disagrees raises `JudgeFailed`; the rebuild then loads again judging in its own
   process (`rebuild.rebuild`): it costs time, never a verdict, and the daemon gets a
   projection.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import struct
import subprocess
import sys
import tempfile
from array import array
from pathlib import Path
from typing import IO, Any

from .. import events as ev
from ..trust.binding import LogBinding
from ..trust.keys import LocalKeys, decode_public
from ..trust.ring import KeyRing
from ..trust.roster import Retirement, Roster
from ..trust.teamroot import TeamRoot
from ..trust.verdicts import VerdictMemory
from ..trust.verify import Verifier
from .facts import FactFile
from .log import EventLog, ReadResult
from .readahead import log_batches
from .rebuild import JudgeFailed, collector_paused
from .verified import Judged, Ruling, VerifiedFold, ruling

log = logging.getLogger(__name__)

__all__ = ["ApartJudge"]

_HEAD = struct.Struct(">II")  # bytes of the frame's JSON, bytes of its array of places
MAX_PART = 1 << 30  # a frame's part larger than this is not ours


class ApartJudge:
    """The rebuild's end of the second process: the ruling on each batch read here (see the
    module rules). Use inside ``with``, which ends the process however the load ends."""

    def __init__(self, fold: VerifiedFold, proc: subprocess.Popen[bytes], errors: IO[bytes]):
        self._fold = fold
        self._proc = proc
        self._errors = errors
        self._done = False  # the process stopped judging (the fold judges the rest)

    @classmethod
    def start(cls, fold: VerifiedFold, event_log: EventLog, state: dict[str, Any], **sizes: int) -> ApartJudge:
        """Start the process on ``event_log`` with the fold's ``state`` and the batches' ``sizes``."""
        config = json.dumps({**state, "log": str(event_log.root), "sizes": sizes}).encode()
        package_root = str(Path(__file__).resolve().parents[2])  # the thrum this process runs
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        errors = tempfile.TemporaryFile()  # not a pipe: a chatty process never blocks on it
        try:
            with tempfile.TemporaryFile() as given:
                given.write(config)
                given.seek(0)
                proc = subprocess.Popen(
                    [sys.executable, "-m", "thrum.store.judge_process"],
                    stdin=given,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    close_fds=True,
                    env=env,
                )
        except OSError as exc:
            errors.close()
            raise JudgeFailed(f"cannot start it: {exc}") from exc
        return cls(fold, proc, errors)

    def __enter__(self) -> ApartJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc.wait()
        self._errors.close()

    def ruling(self, result: ReadResult) -> Ruling | None:
        """The ruling on the batch read here as ``result``; None once the process stopped
        judging (the batch is judged with its fold)."""
        if self._done:
            return None
        frame, places = self._frame()
        try:
            found, holds = _ruling_of(frame, places, result)
        except (KeyError, TypeError, ValueError, IndexError, ev.MalformedEvent) as exc:
            raise self._failed(f"a malformed ruling ({type(exc).__name__}: {exc})") from exc
        if holds:
            self._take_over()
        return found

    def finish(self) -> None:
        """After the last batch: take over what the process learned (rule 3)."""
        if not self._done:
            self._take_over()

    def _take_over(self) -> None:
        frame, _ = self._frame()
        try:
            if frame.get("t") != "end":
                raise ValueError(f"expected its end, got {str(frame.get('t'))[:20]!r}")
            waiting = [
                (_text(key), _text(kind), _text(shard), base64.b64decode(_text(line), validate=True))
                for key, kind, shard, line in frame["waiting"]
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise self._failed(f"a malformed end ({exc})") from exc
        assert self._proc.stdout is not None
        if self._proc.stdout.read(1) or self._proc.wait() != 0:
            raise self._failed("it went on after its end")
        if not self._fold.adopt(waiting):
            raise self._failed("the keys it learned cannot be read")
        self._done = True

    def _frame(self) -> tuple[dict[str, Any], bytes]:
        assert self._proc.stdout is not None
        head = self._proc.stdout.read(_HEAD.size)
        if len(head) != _HEAD.size:
            raise self._failed("it stopped before the end of the log")
        size, count = _HEAD.unpack(head)
        if size > MAX_PART or count > MAX_PART:
            raise self._failed("a frame too large")
        body = self._proc.stdout.read(size + count)
        if len(body) != size + count:
            raise self._failed("it stopped in the middle of a frame")
        try:
            frame = json.loads(body[:size])
        except ValueError as exc:
            raise self._failed(f"a frame that is not JSON ({exc})") from exc
        if not isinstance(frame, dict):
            raise self._failed("a frame that is not an object")
        return frame, body[size:]

    def _failed(self, why: str) -> JudgeFailed:
        if self._proc.poll() is None:
            self._proc.kill()
        code = self._proc.wait()
        self._errors.seek(0)
        said = self._errors.read()[-2000:].decode(errors="replace").strip().splitlines()[-1:]
        return JudgeFailed(f"{why} (exit {code}{': ' + said[0] if said else ''})")


def _ruling_of(frame: dict[str, Any], places: bytes, result: ReadResult) -> tuple[Ruling, bool]:
    """The `Ruling` a batch frame carries, checked against the batch read here."""
    records, lines = result.records, result.lines
    if frame.get("t") != "batch":
        raise ValueError(f"expected a batch, got {str(frame.get('t'))[:20]!r}")
    if frame["n"] != len(records):
        raise ValueError(f"it read {frame['n']} lines where this process read {len(records)}")
    ends = {shard: p.offset for shard, p in result.positions.items()}
    if frame["ends"] != ends:
        raise ValueError("its batch ends elsewhere in the log")
    extra = [(_text(shard), base64.b64decode(_text(line), validate=True)) for shard, line in frame["extra"]]
    decoded: dict[int, tuple[str, dict[str, Any]]] = {}

    def accepted(i: int) -> tuple[str, dict[str, Any]]:  # a line from an earlier batch, judged again
        found = decoded.get(i)
        if found is None:
            shard, line = extra[-i - 1]
            found = decoded[i] = (shard, ev.decode_line(line))  # as a line kept is decoded to be judged again
        return found

    def line_at(i: int) -> bytes:
        return lines[i] if i >= 0 else extra[-i - 1][1]

    at = array("i")
    at.frombytes(places)
    if at and (max(at) >= len(records) or -min(at) > len(extra)):
        raise IndexError("a place outside its batch")
    future = [(_text(s), _text(e), _int(t), line_at(_int(i))) for s, e, t, i in frame["future"]]
    if any(i >= len(records) or -i > len(extra) for *_, i in frame["future"]):
        raise IndexError("a place outside its batch")
    return (
        Ruling(
            accepted=[records[i] if i >= 0 else accepted(i) for i in at],
            refused=[_four(r) for r in frame["refused"]],
            future=future,
            waiting=[_four(r) for r in frame["waiting"]],
            retired=[Retirement(*_four(r)) for r in frame["retired"]],
            resolved=[_text(k) for k in frame["resolved"]],
        ),
        frame["holds"] is True,
    )


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{type(value).__name__} where a string belongs")
    return value


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"{type(value).__name__} where a number belongs")
    return value


def _four(row: Any) -> tuple[str, str, str, str]:
    a, b, c, d = row
    return _text(a), _text(b), _text(c), _text(d)


# ---------------------------------------------------------------------- the second process


def _batch_frame(result: ReadResult, judged: Judged | None) -> bytes:
    """The frame of one batch (its ruling, lines by their place in the batch; lines judged
    again, from earlier batches, sent whole)."""
    frame: dict[str, Any] = {
        "t": "batch",
        "n": len(result.records),
        "ends": {shard: p.offset for shard, p in result.positions.items()},
        "extra": [],
        "refused": [],
        "future": [],
        "waiting": [],
        "retired": [],
        "resolved": [],
        "holds": False,
    }
    places = array("i")
    if judged is not None:
        found = ruling(judged)
        by_event = {id(d): i for i, (_, d) in enumerate(result.records)}
        by_line = {id(line): i for i, line in enumerate(result.lines)}
        again = {id(c.event): c for c in judged.retried}
        extra: list[list[str]] = frame["extra"]

        def outside(shard: str, line: bytes) -> int:
            extra.append([shard, base64.b64encode(line).decode()])
            return -len(extra)

        for _, d in found.accepted:
            i = by_event.get(id(d))
            if i is None:
                c = again[id(d)]  # a line judged again: it is in no batch of the reader's
                i = outside(c.shard, c.line)
            places.append(i)
        for shard, eid, at, line in found.future:
            i = by_line.get(id(line))
            frame["future"].append([shard, eid, at, i if i is not None else outside(shard, line)])
        frame.update(
            refused=found.refused,
            waiting=found.waiting,
            retired=[[r.name, r.key, r.point, r.why] for r in found.retired],
            resolved=found.resolved,
            holds=bool(found.future),
        )
    body = json.dumps(frame).encode()
    data = places.tobytes()
    return _HEAD.pack(len(body), len(data)) + body + data


def _fold_from(state: dict[str, Any]) -> VerifiedFold:
    """The fold this process judges with (`VerifiedFold.apart_state`), primed as at a daemon's start."""
    identities = state.get("identities")
    ring = KeyRing(state["ring"], LocalKeys(identities) if identities else None)
    root = state.get("root")
    team_root = None
    if root is not None:
        team_root = TeamRoot(
            log_id=root["log_id"],
            policy=root["policy"],
            admins={n: decode_public(k) for n, k in root["admins"].items()},
            members={n: decode_public(k) for n, k in root["members"].items()},
            version=root["version"],
        )
    verifier = Verifier(
        ring,
        skew_s=float(state["skew_s"]),
        roster=Roster(ring, team_root),
        binding=LogBinding(state.get("log_id")),
    )
    fold = VerifiedFold(
        verifier,
        VerdictMemory(state.get("memory")),
        pending_limit=int(state["pending_limit"]),
        pending_bytes=int(state["pending_bytes"]),
        facts=FactFile(state["facts"]),
    )
    fold.prime()
    return fold


def main() -> int:
    """The second process: its orders on stdin (one JSON object), frames on stdout."""
    config = json.loads(sys.stdin.buffer.read())
    out = sys.stdout.buffer
    with collector_paused():
        fold = _fold_from(config)
        judge = fold.judge_ahead()
        sizes = config["sizes"]
        for batch in log_batches(EventLog(config["log"]), {}, **sizes):
            result = batch.result
            judged = judge(result.records, result.lines) if result.records else None
            out.write(_batch_frame(result, judged))
            if judged is not None and judged.verdict.future:
                break  # held lines may come due from here: the rebuild's fold judges the rest
            del batch, result, judged
        fold.verifier.ring.flush()
        waiting = [[k, kind, s, base64.b64encode(line).decode()] for k, kind, s, line in fold.waiting_lines()]
        body = json.dumps({"t": "end", "waiting": waiting}).encode()
        out.write(_HEAD.pack(len(body), 0) + body)
        out.flush()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="thrum judge: %(message)s")
    sys.exit(main())
