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
from typing import Iterable

import peewee as pw

from .. import safejson
from ..trust.signing import signature_of, verify
from ..trust.verdicts import VerdictMemory, digest
from ..trust.verify import Candidate, Verdict, Verifier
from . import projection
from .log import LogIssue, Position

log = logging.getLogger(__name__)

__all__ = ["VerifiedFold"]

LOAD_MEMORY_AT = 2_000  # lines in one fold from which reading the verdict memory pays off


class VerifiedFold:
    """A `projection.FoldFn` that verifies before folding (see the module docstring)."""

    def __init__(self, verifier: Verifier, memory: VerdictMemory | None = None, pending_limit: int = 100_000):
        self.verifier = verifier
        self.memory = memory or VerdictMemory(None)
        self.pending_limit = pending_limit
        self._pending: dict[str, list[Candidate]] = {}
        self._pending_count = 0

    @property
    def pending(self) -> int:
        return self._pending_count

    def release(self) -> None:
        """Free the in-memory verdicts a large fold loaded (after start-up)."""
        self.memory.release()

    def remember_written(self, lines: list[bytes]) -> None:
        """Lines this daemon wrote and signed: a rebuild need not verify them again."""
        self.memory.remember([digest(line) for line in lines])

    def __call__(
        self,
        db: pw.SqliteDatabase,
        records: list[tuple[str, dict]],
        lines: list[bytes],
        *,
        issues: Iterable[LogIssue] = (),
        positions: dict[str, Position] | None = None,
        keep_applied: bool = True,
    ) -> projection.FoldResult:
        """Fold lines read back from the log (start-up, catch-up, rebuild)."""
        remembered = self.memory.known()
        if remembered is None and len(lines) >= LOAD_MEMORY_AT:
            remembered = self.memory.load()  # a rebuild or a long catch-up: hash and look up, not verify
        return self._fold(db, records, lines, remembered, issues=issues, positions=positions, keep_applied=keep_applied)

    def received(
        self,
        db: pw.SqliteDatabase,
        records: list[tuple[str, dict]],
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
        records: list[tuple[str, dict]],
        lines: list[bytes],
        remembered: set[bytes] | None,
        *,
        issues: Iterable[LogIssue],
        positions: dict[str, Position] | None,
        keep_applied: bool,
        received: bool = False,
    ) -> projection.FoldResult:
        assert len(records) == len(lines)
        verdict = self.verifier.check(
            [Candidate(shard, line, d) for (shard, d), line in zip(records, lines)], remembered
        )
        resolved: list[str] = []
        if verdict.learned and self._pending:
            retry = [c for name in verdict.learned for c in self._pending.pop(name, [])]
            if retry:
                self._pending_count -= len(retry)
                resolved = [_issue_key(c) for c in retry]
                again = self.verifier.check(retry)
                verdict.accepted.extend(again.accepted)
                verdict.rejected.extend(again.rejected)
                verdict.pending.extend(again.pending)
        self._hold(verdict)
        if received:
            self._note_conflicts(verdict)
        self.memory.remember(verdict.fresh)
        refused = [(r.kind, r.shard, r.event_id, r.reason) for r in verdict.rejected]
        refused += [
            (
                "unknown-signer",
                c.shard,
                str(c.event.get("event_id", "?")),
                f"no key is known for {_signer(c)} yet; applied once its registration arrives",
            )
            for c in verdict.pending
        ]
        return projection.fold(
            db,
            verdict.accepted,
            issues=issues,
            positions=positions,
            keep_applied=keep_applied,
            refused=refused,
            resolved=resolved,
        )

    def _note_conflicts(self, verdict: Verdict) -> None:
        """Lines from the remote refused because their name is claimed by two keys (issue 30,
        item 4): counted by the refused key that signed them (one verification each; such
        lines are few), with when they came, so `sync` and `doctor` can say so. Lines read
        back from the log (a rebuild) are not news and are not counted."""
        ring = self.verifier.ring
        conflicted = ring.conflicted()
        if not conflicted:
            return
        counts: dict[str, dict[str, int]] = {}
        keys: dict[str, dict] = {}
        for r in verdict.rejected:
            if r.signer not in conflicted or r.kind == "bad-seal":
                continue
            if r.signer not in keys:
                keys[r.signer] = ring.conflict_keys(r.signer)
            b64 = _signed_by(r.line, keys[r.signer])
            if b64 is not None:
                by_key = counts.setdefault(r.signer, {})
                by_key[b64] = by_key.get(b64, 0) + 1
        if counts:
            ring.note_received(counts)

    def _hold(self, verdict: Verdict) -> None:
        for c in verdict.pending:
            if self._pending_count >= self.pending_limit:
                log.warning(
                    "more than %d lines wait for unknown signers; the rest stay quarantined until a rebuild",
                    self.pending_limit,
                )
                return
            self._pending.setdefault(_signer(c), []).append(c)
            self._pending_count += 1


def _signed_by(line: bytes, keys: dict) -> str | None:
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


def _issue_key(c: Candidate) -> str:
    return f"unknown-signer:{c.shard}:{c.event.get('event_id', '?')}"
