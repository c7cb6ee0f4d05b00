"""The fold of lines read from the log after the trust check: the daemon's only way in.

Every line that reaches the projection from a file — at start-up, in a rebuild, or
received from the remote — is judged first (`thrum.trust.verify`): accepted lines
are folded; quarantined ones are recorded in ``fold_issues`` by reason and never
applied; lines whose signer's key is not known yet wait here (bounded) and are
judged again once a registration teaches the key. Lines the daemon writes itself
are signed by it and folded directly by the writer.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import peewee as pw

from .. import safejson
from ..trust.keys import PublicKey
from ..trust.roster import Retirement
from ..trust.signing import signature_of, verify
from ..trust.verdicts import VerdictMemory, digest
from .. import events as ev
from ..trust.verify import RETRY_KINDS, Candidate, Verdict, Verifier
from .facts import FactFile
from . import held as held_lines
from . import projection
from .log import LogIssue, Position
from .retired import signed_with

log = logging.getLogger(__name__)

__all__ = ["Judged", "Ruling", "VerifiedFold", "ruling"]

LOAD_MEMORY_AT = 2_000  # lines in one fold from which reading the verdict memory pays off
PENDING_BYTES = 32 * 1024 * 1024  # lines of unknown signers kept to judge again (and at most 100,000)


@dataclass
class Judged:
    """A batch judged (`VerifiedFold.judge_ahead`), to be folded by `VerifiedFold.apply_judged`."""

    verdict: Verdict
    resolved: list[str]  # keys of the lines kept before that this batch judged again
    retried: list[Candidate] = field(default_factory=list)  # those lines (not in the batch)


@dataclass
class Ruling:
    """What the fold of a judged batch needs of its verdict (`ruling`), and nothing else: the
    accepted lines in the order they are applied, the refusals (kind, shard, event id,
    reason), the lines dated ahead (shard, event id, their time in ms, the line), the lines
    that wait (refusals too, recorded after those), the retirements, and the keys of the
    lines kept before that are let go of. A trust check
    in another process (`judge_process`) sends this much, compactly."""

    accepted: list[tuple[str, dict[str, Any]]]
    refused: list[tuple[str, str, str, str]]
    future: list[tuple[str, str, int, bytes]]
    waiting: list[tuple[str, str, str, str]]
    retired: list[Retirement]
    resolved: list[str]


def ruling(judged: Judged) -> Ruling:
    """The `Ruling` of a judged batch."""
    verdict = judged.verdict
    refused = [(r.kind, r.shard, r.event_id, r.reason) for r in verdict.rejected]
    waiting = [
        (
            "unknown-signer",
            c.shard,
            str(c.event.get("event_id", "?")),
            f"no key is known for {_signer(c)} yet; applied once its registration arrives",
        )
        for c in verdict.pending
    ]
    waiting += [(kind, c.shard, str(c.event.get("event_id", "?")), why) for c, kind, _, why in verdict.waiting]
    future = [(c.shard, str(c.event.get("event_id", "?")), at, c.line) for c, at in verdict.future]
    return Ruling(verdict.accepted, refused, future, waiting, verdict.retired, judged.resolved)


class VerifiedFold:
    """A `projection.FoldFn` that verifies before folding (see the module docstring)."""

    def __init__(
        self,
        verifier: Verifier,
        memory: VerdictMemory | None = None,
        pending_limit: int = 100_000,
        pending_bytes: int = PENDING_BYTES,
        facts: FactFile | None = None,
        lines_of: Callable[[str], Iterable[bytes]] | None = None,
    ):
        self.verifier = verifier
        self.lines_of = lines_of  # the log's lines that may be an agent's (`retired.author_lines`)
        self.memory = memory or VerdictMemory(None)
        self.pending_limit = pending_limit
        self.pending_bytes = pending_bytes
        self._pending: dict[str, list[tuple[str, bytes, str]]] = {}  # wait key -> (shard, line, kind)
        self.facts = facts  # the team facts judged so far (kept for the next start: `prime`)
        self.rejudge: str | None = None  # why the view must be judged again (a key retired), for the daemon
        self.unblocked_by_writes: list[str] = []
        self._pending_count = 0
        self._pending_size = 0
        self._retry_count = 0  # of the lines kept, those refused for a key not known yet (RETRY_KINDS)

    @property
    def pending(self) -> int:
        return self._pending_count

    def release(self) -> None:
        """Free the in-memory verdicts a large fold loaded (after start-up)."""
        self.memory.release()

    def remember_written(self, lines: list[bytes]) -> None:
        """Lines this daemon wrote and signed: a rebuild need not verify them again."""
        self.memory.remember([digest(line) for line in lines])
        self.note_written(lines)

    def __call__(
        self,
        db: pw.SqliteDatabase,
        records: list[tuple[str, dict[str, Any]]],
        lines: list[bytes],
        *,
        issues: Iterable[LogIssue] = (),
        positions: dict[str, Position] | None = None,
        keep_applied: bool = True,
    ) -> projection.FoldResult:
        """Fold lines read back from the log (start-up, catch-up, rebuild)."""
        return self._fold(
            db,
            records,
            lines,
            self._remembered(len(lines)),
            issues=issues,
            positions=positions,
            keep_applied=keep_applied,
        )

    def received(
        self,
        db: pw.SqliteDatabase,
        records: list[tuple[str, dict[str, Any]]],
        lines: list[bytes],
        *,
        issues: Iterable[LogIssue] = (),
        positions: dict[str, Position] | None = None,
    ) -> projection.FoldResult:
        """Fold lines a merge just brought from the remote. They are new to this replica,
        so the verdict memory cannot know them: it is never read for them (on a
        million-line log that read alone cost a quarter of a second)."""
        return self._fold(
            db,
            records,
            lines,
            self.memory.known(),
            issues=issues,
            positions=positions,
            keep_applied=True,
            received=True,
        )

    def _fold(
        self,
        db: pw.SqliteDatabase,
        records: list[tuple[str, dict[str, Any]]],
        lines: list[bytes],
        remembered: set[bytes] | None,
        *,
        issues: Iterable[LogIssue],
        positions: dict[str, Position] | None,
        keep_applied: bool,
        received: bool = False,
    ) -> projection.FoldResult:
        due = self._take_due(db)
        judged = self._judge(records, lines, remembered, due, received=received)
        return self.apply_judged(db, judged, issues=issues, positions=positions, keep_applied=keep_applied)

    def judge_ahead(self) -> Callable[[list[tuple[str, dict[str, Any]]], list[bytes]], Judged | None]:
        """For a rebuild reading its log ahead (`readahead.ReaderThread`): a judge of each
        next batch, called in the reader's thread while the batch before is folded; its
        `Judged` goes to `apply_judged`, in the log's order. The judging is this fold's own
        state (keys, lines waiting, facts, the verdict memory); what it needs of the
        database is the held lines come due, and a rebuild starts with none: once a batch
        holds a line (dated ahead), the judge says None for every batch after it, which
        are then judged with their fold (`__call__`), exactly as without reading ahead."""
        holding = False

        def judge(records: list[tuple[str, dict[str, Any]]], lines: list[bytes]) -> Judged | None:
            nonlocal holding
            if holding:
                return None
            judged = self._judge(records, lines, self._remembered(len(lines)), ([], []))
            holding = bool(judged.verdict.future)
            return judged

        return judge

    def _remembered(self, lines: int) -> set[bytes] | None:
        remembered = self.memory.known()
        if remembered is None and lines >= LOAD_MEMORY_AT:
            remembered = self.memory.load()  # a rebuild or a long catch-up: hash and look up, not verify
        return remembered

    def _judge(
        self,
        records: list[tuple[str, dict[str, Any]]],
        lines: list[bytes],
        remembered: set[bytes] | None,
        due: tuple[list[str], list[Candidate]],
        *,
        received: bool = False,
    ) -> Judged:
        """The verdict on a batch (and the held lines come due), with what it changes of
        this fold's state (lines kept to judge again, facts, the verdict memory)."""
        assert len(records) == len(lines)
        candidates = [Candidate(shard, line, d) for (shard, d), line in zip(records, lines)]
        resolved: list[str] = list(due[0])
        candidates += due[1]
        retried: set[int] = set()  # lines judged again in this fold (kept from earlier ones)
        again_lines: list[Candidate] = []
        verdict = self.verifier.check(candidates, remembered)
        if self.unblocked_by_writes:  # facts this daemon wrote since the last fold
            verdict.unblocked += self.unblocked_by_writes
            self.unblocked_by_writes = []
        for _ in range(8):  # a fact may let lines through that let more through (admit → register → lines)
            retry = self._take_pending(verdict.learned + verdict.unblocked) if self._pending else []
            if not retry:
                break
            retried.update(id(c.line) for _, c in retry)
            again_lines += [c for _, c in retry]
            verdict.learned, verdict.unblocked = [], []
            resolved += [key for key, _ in retry]
            again = self.verifier.check([c for _, c in retry])
            for name in ("accepted", "rejected", "pending", "future", "fresh", "waiting", "retired", "facts"):
                getattr(verdict, name).extend(getattr(again, name))
            verdict.learned, verdict.unblocked = again.learned, again.unblocked
        self._hold(verdict)
        self._keep_facts(verdict)
        if received:
            self._note_conflicts(verdict, retried)
        self.memory.remember(verdict.fresh)
        return Judged(verdict, resolved, again_lines)

    def apply_judged(
        self,
        db: pw.SqliteDatabase,
        judged: Judged,
        *,
        issues: Iterable[LogIssue] = (),
        positions: dict[str, Position] | None = None,
        keep_applied: bool = True,
    ) -> projection.FoldResult:
        """Fold a judged batch: its accepted lines applied, the others recorded (`judge_ahead`)."""
        return self.apply_ruling(db, ruling(judged), issues=issues, positions=positions, keep_applied=keep_applied)

    def apply_ruling(
        self,
        db: pw.SqliteDatabase,
        found: Ruling,
        *,
        issues: Iterable[LogIssue] = (),
        positions: dict[str, Position] | None = None,
        keep_applied: bool = True,
    ) -> projection.FoldResult:
        """Fold a batch judged here or by another process (`judge_process`): the lines dated
        ahead held (as room allows), a retirement's reach checked, the rest folded."""
        held = self._held_rows(db, found.future)
        refused = found.refused + [
            ("future", shard, eid, _future_reason(at, self.verifier.skew_s, kept)) for (shard, eid, at, _), kept in held
        ]
        refused += found.waiting
        if found.retired:
            self._check_retired(db, found.retired)
        return projection.fold(
            db,
            found.accepted,
            issues=issues,
            positions=positions,
            keep_applied=keep_applied,
            refused=refused,
            resolved=found.resolved,
            held=[row for _, row in held if row is not None],
        )

    def _note_conflicts(self, verdict: Verdict, retried: set[int]) -> None:
        """Lines from the remote refused because their name is claimed by two keys (issue 30,
        item 4): counted by the refused key that signed them (one verification each; such
        lines are few), with when they came, so `sync` and `doctor` can say so. Lines read
        back from the log (a rebuild) are not news and are not counted."""
        ring = self.verifier.ring
        conflicted = ring.conflicted()
        if not conflicted:
            return
        counts: dict[str, dict[str, int]] = {}
        keys: dict[str, dict[str, PublicKey]] = {}
        for r in verdict.rejected:
            if r.signer not in conflicted or r.kind == "bad-seal" or id(r.line) in retried:
                continue  # a line judged again was counted when it came
            if r.signer not in keys:
                keys[r.signer] = ring.conflict_keys(r.signer)
            b64 = _signed_by(r.line, keys[r.signer])
            if b64 is not None:
                by_key = counts.setdefault(r.signer, {})
                by_key[b64] = by_key.get(b64, 0) + 1
        if counts:
            ring.note_received(counts)

    # ------------------------------------------------------------------ judged in another process

    def apart_state(self) -> dict[str, Any] | None:
        """What a second process needs to judge a rebuild's log as this fold would
        (`judge_process`): where this fold's state is kept (the ring's keys, the team facts,
        the verdict memory, the local identities) and what is not in a file (the root, the
        log id, the clock's skew, the bounds). None when that state is not all in files: no
        file for the keys or the facts, lines waiting, facts written here not judged yet, or
        a clock of its own (a test's)."""
        ring, roster = self.verifier.ring, self.verifier.roster
        if ring.path is None or self.facts is None or self.facts.path is None:
            return None
        if self._pending or self.unblocked_by_writes or self.verifier.clock is not time.time:
            return None
        ring.flush()  # the second process starts from what this one knows
        root = roster.root.to_json() if roster.root is not None else None
        return {
            "ring": str(ring.path),
            "identities": str(ring.local.dir) if ring.local is not None else None,
            "facts": str(self.facts.path),
            "memory": str(self.memory.path) if self.memory.path is not None else None,
            "root": root,
            "log_id": self.verifier.binding.get(),
            "skew_s": self.verifier.skew_s,
            "pending_limit": self.pending_limit,
            "pending_bytes": self.pending_bytes,
        }

    def judge_apart(self, event_log: Any, **sizes: int) -> Any:
        """A second process judging ``event_log`` for a rebuild (`judge_process.ApartJudge`,
        the batches of ``sizes``), or None when this fold's state cannot be handed to one."""
        from .judge_process import ApartJudge

        state = self.apart_state()
        return None if state is None else ApartJudge.start(self, event_log, state, **sizes)

    def waiting_lines(self) -> list[tuple[str, str, str, bytes]]:
        """The lines kept to judge again: (wait key, kind, shard, line), in the order kept."""
        return [(key, kind, shard, line) for key, held in self._pending.items() for shard, line, kind in held]

    def adopt(self, waiting: list[tuple[str, str, str, bytes]]) -> bool:
        """Take over the state a second process left after judging part of a rebuild's log
        (`judge_process`): the keys it learned (the ring's file), the facts (the fact file,
        judged again as at a start: `prime`), the verdict memory (read again when next
        needed) and the lines still waiting (``waiting``, as `waiting_lines`). False when
        the keys cannot be read (nothing is taken over)."""
        if not self.verifier.ring.reload():
            return False
        if self.facts is not None:
            self.facts.reread()
        self.memory.release()
        self.prime()
        for key, kind, shard, line in waiting:
            self._keep(key, kind, shard, line)
            if kind in RETRY_KINDS:
                self._retry_count += 1
        return True

    # ------------------------------------------------------------------ lines dated ahead

    def release_due(self, db: pw.SqliteDatabase) -> projection.FoldResult:
        """Fold the held lines whose time has come (call with the writer's lock held)."""
        return self._fold(db, [], [], self.memory.known(), issues=(), positions=None, keep_applied=True)

    def next_due(self, db: pw.SqliteDatabase) -> float | None:
        """Seconds (epoch) at which the earliest held line may be applied; None: nothing is held."""
        at = held_lines.next_due(db)
        return None if at is None else at / 1000 - self.verifier.skew_s

    def _take_due(self, db: pw.SqliteDatabase) -> tuple[list[str], list[Candidate]]:
        """The held lines whose time has come: their keys (let go of in the fold's
        transaction) and the lines, to be judged with the batch."""
        keys, candidates = [], []
        for key, shard, line in held_lines.due(db, self.verifier.horizon_ms()):
            keys.append(key)
            try:
                candidates.append(Candidate(shard, line, ev.decode_line(line)))
            except ev.MalformedEvent:
                continue  # it decoded when it was held; a newer rule refuses it: nothing to apply
        return keys, candidates

    def _held_rows(
        self, db: pw.SqliteDatabase, future: list[tuple[str, str, int, bytes]]
    ) -> list[tuple[tuple[str, str, int, bytes], held_lines.HeldRow | None]]:
        """Each future line (shard, event id, time, line) with its ``held_lines`` row, or None
        when holding it would go past `held_lines.MAX_HELD_BYTES` (it stays quarantined; a
        rebuild after its time applies it)."""
        if not future:
            return []
        total = held_lines.held_bytes(db)  # a small table: lines dated ahead are rare
        out = []
        for shard, eid, at, line in future:
            row: held_lines.HeldRow | None = None
            if total + len(line) <= held_lines.MAX_HELD_BYTES:
                row = (f"future:{shard}:{eid}", shard, eid, at, line)
                total += len(line)
            out.append(((shard, eid, at, line), row))
        return out

    def _hold(self, verdict: Verdict) -> None:
        """Keep lines that wait (an unknown signer, an admission, a group's creation) to judge
        again, bounded by count and by bytes (the remote may send 100,000 lines of up to
        20 MB): past the bounds, they stay quarantined until a rebuild judges them again.
        Lines refused because none of their signer's keys known now verifies them
        (`verify.RETRY_KINDS`) wait too, for a key the signer gets later (a rotation or an
        admission not arrived yet), within a tenth of the bounds: junk signed as a known
        agent costs one verification per line each time that agent gets a key."""
        waiting = [(_signer(c), "unknown-signer", c.shard, c.line) for c in verdict.pending]
        waiting += [(key, kind, c.shard, c.line) for c, kind, key, _ in verdict.waiting]
        for key, kind, shard, line in waiting:
            if not self._room(line, 1):
                log.warning(
                    "more than %d lines (%d MiB) wait for unknown signers; the rest stay quarantined until a rebuild",
                    self.pending_limit,
                    self.pending_bytes >> 20,
                )
                return
            self._keep(key, kind, shard, line)
        for r in verdict.rejected:
            if (
                r.kind in RETRY_KINDS
                and r.signer
                and self._room(r.line, 10)
                and self._retry_count < self.pending_limit // 10
            ):
                self._keep(r.signer, r.kind, r.shard, r.line)
                self._retry_count += 1

    def _room(self, line: bytes, share: int) -> bool:
        return (
            self._pending_count < self.pending_limit and self._pending_size + len(line) <= self.pending_bytes // share
        )

    def _keep(self, key: str, kind: str, shard: str, line: bytes) -> None:
        self._pending.setdefault(key, []).append((shard, line, kind))
        self._pending_count += 1
        self._pending_size += len(line)

    def _take_pending(self, keys: list[str]) -> list[tuple[str, Candidate]]:
        """(issue key, line) of the lines waiting on ``keys``, taken out to be judged again."""
        out = []
        for key in keys:
            for shard, line, kind in self._pending.pop(key, []):
                self._pending_count -= 1
                self._pending_size -= len(line)
                if kind in RETRY_KINDS:
                    self._retry_count -= 1
                try:
                    c = Candidate(shard, line, ev.decode_line(line))
                except ev.MalformedEvent:
                    continue  # it decoded when it was held
                out.append((f"{kind}:{shard}:{c.event.get('event_id', '?')}", c))
        return out

    # ------------------------------------------------------------------ team facts

    def ask_rejudge(self, reason: str) -> None:
        """Have the daemon judge the whole log again (`Writer.after_facts`)."""
        self.rejudge = reason

    def take_rejudge(self) -> str | None:
        """Why the whole log must be judged again (None: it need not), handed over once:
        the daemon rebuilds the view for it (`Writer.after_facts`), so it is cleared here."""
        reason, self.rejudge = self.rejudge, None
        return reason

    def forget_pending(self) -> None:
        """Drop the lines kept to judge again (before a rebuild, which reads them all again)."""
        self._pending.clear()
        self._pending_count = 0
        self._pending_size = 0
        self._retry_count = 0
        self.unblocked_by_writes = []

    def waiting_keys(self, name: str) -> list[str]:
        """The keys of registrations of ``name`` that wait for an admission (`thrum team admit`)."""
        found = []
        for _, line, _ in self._pending.get(f"admit:{name}", []):
            try:
                key = ev.decode_line(line).get("public_key")
            except ev.MalformedEvent:
                continue
            if isinstance(key, str) and key not in found:
                found.append(key)
        return found

    def _keep_facts(self, verdict: Verdict) -> None:
        if verdict.facts and self.facts is not None:
            self.facts.add(verdict.facts)

    def _check_retired(self, db: pw.SqliteDatabase, retired: list[Retirement]) -> None:
        """A key retired now may cover lines applied before: the view is judged again
        (rebuilt) when a line of that agent at or after the point was applied *and* the log
        holds a line of that agent at or after the point signed with that key. The second
        question spares the rebuild in the usual case — a lost laptop's key revoked while
        the agent writes on with its new key, a rotation — and is answered from the log by
        one verification per candidate line (`retired.signed_with`); without the log (or with too
        many candidates) the answer is yes. Nothing a rebuild would take back is kept: a
        retirement changes only the verdicts of the lines it covers (docs/design/trust.md,
        "Re-judging after a retirement")."""
        for r in retired:
            if not projection.applied_since(db, r.name, r.point):
                continue
            found = signed_with(r, self.lines_of(r.name)) if self.lines_of is not None else "the log was not searched"
            if found is None:
                log.info("no line of %s since %s is signed with the retired key: nothing to take back", r.name, r.point)
                continue
            self.rejudge = f"{r.name}'s key {r.key[:12]}… {r.why}"
            log.warning(
                "lines applied before now count no more (%s; %s): the view will be rebuilt", self.rejudge, found
            )
            return

    def prime(self) -> None:
        """Learn the team facts kept from earlier runs (admissions, rotations, revocations,
        group creators) before anything is folded: they are judged again, not trusted."""
        if self.facts is None:
            return
        lines = self.facts.lines()
        candidates = []
        for line in lines:
            try:
                candidates.append(Candidate("events", line, ev.decode_line(line)))
            except ev.MalformedEvent:
                continue
        if candidates:
            self.verifier.check(candidates)

    def note_written(self, lines: list[bytes]) -> None:
        """Lines this daemon wrote: the facts among them (an admission, a rotation, ...) are
        learned as if received, since the writer folds its own lines without judging them."""
        chosen = [line for line in lines if any(mark in line for mark in _FACT_MARKS)]
        if not chosen:
            return
        candidates = []
        for line in chosen:
            try:
                d = ev.decode_line(line)
            except ev.MalformedEvent:
                continue
            if d.get("type") in _FACT_TYPES:
                candidates.append(Candidate("events", line, d))
        if not candidates:
            return
        verdict = self.verifier.check(candidates)
        self._keep_facts(verdict)
        if any(r.why.startswith("revoked") for r in verdict.retired):  # a rotation here retires a key
            self.rejudge = "a key was revoked on this machine"  # that signed nothing after it yet
        if (verdict.learned or verdict.unblocked) and self._pending:
            self.unblocked_by_writes.extend(verdict.learned + verdict.unblocked)


_FACT_TYPES = frozenset({"agent.admit", "agent.rotate", "agent.revoke", "group.create", "agent.register"})
# This daemon's own encoding of those lines (a register only when it redeems an invite):
_FACT_MARKS = (b'"agent.admit"', b'"agent.rotate"', b'"agent.revoke"', b'"group.create"', b'"invite":{')


def _future_reason(at_ms: int, skew_s: float, kept: held_lines.HeldRow | None) -> str:
    when = ev.ms_rfc3339(at_ms)
    reason = f"dated {when}, more than {skew_s:g} s ahead of this replica's clock: held until then"
    if kept is None:
        reason += " (too many lines are held; a rebuild after that time applies it)"
    return reason


def _signed_by(line: bytes, keys: dict[str, PublicKey]) -> str | None:
    """Which of ``keys`` (base64 → key) signed ``line``, if any."""
    try:
        raw = safejson.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    return next((b64 for b64, key in keys.items() if verify(raw, key)), None)


def _signer(c: Candidate) -> str:
    found = signature_of(c.event)
    return found[0] if found else ""
