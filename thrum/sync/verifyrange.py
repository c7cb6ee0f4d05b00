"""``thrum verify``: judge a range of ``a-sync`` as every replica would, on the remote's side.

A replica quarantines what it must not apply, but only after the push landed: every
other replica then has to judge (and store) it too, and a fresh clone sees whatever
was left. A pre-receive hook on a self-hosted server, or a required CI check on a
forge, can refuse such a push first (issue 25, item 7). Rules:

1. The range is the log files that differ between ``old`` and ``new`` (commits of
   ``a-sync``; ``old`` absent or all zeros: from nothing). Bare repositories are fine;
   in a pre-receive hook the pushed objects are still in git's quarantine directory
   (``GIT_OBJECT_DIRECTORY``), which is read as well.
2. A line is *bad* when a replica would refuse it, with the daemon's own verifier and
   the team's rules (`thrum.trust.verify` over a `Roster` of the committed root):
   malformed, in another agent's file (``forged``), unsigned, not verifying, of a
   signer no registration names (``unknown-signer``), signed for another log
   (``foreign-log``), dated ahead (``future``), a second registration of a name with
   another key (``key-conflict``), a registration nobody admitted (``not-admitted``),
   team or group management by someone not allowed (``not-authorized``), signed with
   a key retired at its id by a rotation or a revocation (``revoked``). Lines that
   wait in a replica (an unknown signer, an admission, a group's creation) are judged
   again when a fact of the range lets them through, as the daemon's fold does; what
   still waits is bad. Seals keep it cheap: a 10,000-line push costs a few
   verifications per writer.
3. What the range may build on is what OLD established: the root's admins and
   members, then OLD's registrations (trust on first use, in file order), admissions,
   rotations, revocations and group creations, judged by the same rules.
4. A line of ``old`` that ``new`` no longer holds is bad too (``removed``): history is
   append-only, and a replica would only push it back.
5. The chains the range extends (`thrum.trust.chains.range_faults`): an added event at
   a position another event holds (``fork``), one that does not follow the event
   before it (``broken-link``), and positions skipped between a writer's newest held
   event and its newest added one (``gap``). Reading what was held costs the OLD
   versions of the changed files and the newest segments of each writer's streams;
   every line of a writer only when an added position lies at or below its newest
   (`thrum.sync.rangechains`).
6. One line per bad line, ``path:line: kind: reason``; the exit status says whether
   there was any (the CLI).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ThrumError
from ..events.codec import MalformedEvent, decode_line
from ..events.layout import EVENTS_STREAM, is_log_path
from ..events.shards import ShardRule
from ..trust.binding import LogBinding
from ..trust.ring import KeyRing
from ..trust.roster import Roster
from ..trust.signing import signature_of
from ..trust.teamroot import TeamRoot
from ..trust.verify import Candidate, Verdict, Verifier
from . import SyncError
from .gitstore.api import Commit, Oid
from .gitstore.libgit2 import LibGit2Store
from .rangechains import Blobs, chain_faults
from .teamfile import read_committed_root
from .trees import LayoutTrees
from .worktree import SYNC_REF

__all__ = ["Finding", "RangeVerdict", "committed_log_id", "committed_root", "open_repository", "verify_range"]

ZERO = "0" * 40


@dataclass
class Finding:
    path: str
    line: int  # 1-based in the file of ``new`` (of ``old`` for a removed line)
    kind: str
    reason: str

    def text(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}: {self.reason}"


@dataclass
class RangeVerdict:
    old: str | None
    new: str | None
    files: int = 0
    added: int = 0
    removed: int = 0
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    log_id: str | None = None

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "old": self.old,
            "new": self.new,
            "log_id": self.log_id,
            "files": self.files,
            "added": self.added,
            "removed": self.removed,
            "bad": [f.__dict__ for f in self.findings],
            "seconds": round(self.seconds, 3),
        }


def open_repository(path: os.PathLike[str] | str) -> LibGit2Store:
    """The repository at ``path`` (bare or not), with a pre-receive hook's quarantined objects."""
    store = LibGit2Store.discovered(path)
    quarantine = os.environ.get("GIT_QUARANTINE_PATH") or os.environ.get("GIT_OBJECT_DIRECTORY")
    if quarantine and Path(quarantine).is_dir():
        store.add_alternate(Path(quarantine))
    return store


def committed_root(repo_path: os.PathLike[str] | str, remote: str = "origin") -> TeamRoot | None:
    """The team root committed on the normal branch, or None without one: what a range is
    judged against (admins, members, policy, log id) besides OLD's own facts.

    Raises:
        ThrumError: the root is there but cannot be used (one line).
    """
    committed = read_committed_root(repo_path, remote)
    if committed.error:
        raise ThrumError(f"the team root cannot be used: {committed.error}")
    return committed.root


def committed_log_id(repo_path: os.PathLike[str] | str, remote: str = "origin") -> str | None:
    """The committed root's log id, or None (no root, or one that cannot be used: logged)."""
    try:
        root = committed_root(repo_path, remote)
        return root.log_id if root is not None else None
    except Exception as exc:  # noqa: BLE001 - an unusable root binds nothing; `sync status` says why
        logging.getLogger(__name__).warning("cannot read the team root: %s", exc)
        return None


def _commit(store: LibGit2Store, spec: str | None, what: str) -> Commit | None:
    if spec is None or spec == ZERO:
        return None
    try:
        return store.resolve(spec)
    except (KeyError, ValueError):
        raise SyncError(f"{what} {spec!r} is not a commit in {store.git_dir}") from None


def verify_range(
    repo: LibGit2Store,
    old: str | None,
    new: str | None = None,
    *,
    root: TeamRoot | None = None,
    skew_s: float = Verifier.DEFAULT_SKEW_S,
) -> RangeVerdict:
    """Judge the lines ``new`` adds to and removes from ``old`` (module rules).

    Raises:
        SyncError: ``old`` or ``new`` is not a commit here (``new`` defaults to ``a-sync``).
    """
    start = time.monotonic()
    if new is None:
        if repo.ref(SYNC_REF) is None:
            raise SyncError(f"{repo.git_dir} has no a-sync branch; name the range with --to")
        new = SYNC_REF
    old_commit = _commit(repo, old, "--from")
    new_commit = _commit(repo, new, "--to")
    log_id = root.log_id if root is not None else None
    out = RangeVerdict(
        old=str(old_commit.id) if old_commit else None,
        new=str(new_commit.id) if new_commit else None,
        log_id=log_id,
    )
    trees = LayoutTrees(repo)
    old_tree = old_commit.tree if old_commit else None
    new_tree = new_commit.tree if new_commit else None
    ring = KeyRing(None)
    judge = _Judge(Verifier(ring, skew_s=skew_s, roster=Roster(ring, root), binding=LogBinding(log_id)))
    blobs = Blobs(repo)
    judge.learn(_facts_of(blobs, trees, old_tree))  # what OLD established: keys, admissions, retirements

    batch: list[Candidate] = []
    where: dict[int, tuple[str, int]] = {}  # id(candidate event) -> (path, line number)
    lines_at: dict[int, tuple[str, int]] = {}  # id(candidate line) -> the same
    before: dict[str, list[bytes]] = {}  # path -> its lines in OLD, for changed files
    for change in trees.changes(old_tree, new_tree):
        out.files += 1
        old_lines = blobs.lines(change.old.oid) if change.old is not None else []
        new_lines = blobs.lines(change.new.oid) if change.new is not None else []
        before[change.path] = old_lines
        have_new = set(new_lines)
        for n, line in enumerate(old_lines, 1):
            if line not in have_new:
                out.removed += 1
                out.findings.append(Finding(change.path, n, "removed", f"removes {_describe(line)}"))
        have_old = set(old_lines)
        rule = ShardRule(change.path) if is_log_path(change.path) else None
        for n, line in enumerate(new_lines, 1):
            if line in have_old:
                continue
            out.added += 1
            try:
                d = decode_line(line)
            except MalformedEvent as exc:
                out.findings.append(Finding(change.path, n, "malformed", str(exc)[:300]))
                continue
            if rule is not None and d.get("type") != "seal" and not rule.allows(d):
                out.findings.append(
                    Finding(change.path, n, "forged", f"{d.get('type')} does not belong in {change.path}")
                )
                continue
            where[id(d)] = lines_at[id(line)] = (change.path, n)
            batch.append(Candidate(change.path, line, d))
    verdict = judge.range(batch)
    for r in verdict.rejected:
        path, n = lines_at.get(id(r.line), (r.shard, 0))
        out.findings.append(Finding(path, n, r.kind, r.reason))
    for c in verdict.pending:
        path, n = where.get(id(c.event), (c.shard, 0))
        out.findings.append(Finding(path, n, "unknown-signer", f"no registration names a key for {_signer(c)}"))
    for c, kind, _, why in verdict.waiting:
        path, n = where.get(id(c.event), (c.shard, 0))
        out.findings.append(Finding(path, n, kind, why))
    for c, _at in verdict.future:
        path, n = where.get(id(c.event), (c.shard, 0))
        out.findings.append(Finding(path, n, "future", f"dated more than {skew_s:g} s ahead of this clock"))
    faults = chain_faults(blobs, trees, new_tree, verdict.accepted, before)
    if faults:
        by_event = {str(d.get("event_id")): where[id(d)] for _, d in verdict.accepted if id(d) in where}
        for fault in faults:
            path, n = by_event.get(fault.event_id, ("?", 0))
            out.findings.append(Finding(path, n, fault.kind, fault.reason))
    out.findings.sort(key=lambda f: (f.path, f.line))
    out.seconds = time.monotonic() - start
    return out


class _Judge:
    """The verifier, with what the daemon's fold adds to it: lines that wait (an unknown
    signer, an admission, a group's creation) are judged again when a fact of the same
    range lets them through (`thrum.store.verified`)."""

    ROUNDS = 8

    def __init__(self, verifier: Verifier):
        self.verifier = verifier

    def learn(self, facts: list[Candidate]) -> None:
        self.range(facts)

    def range(self, batch: list[Candidate]) -> Verdict:
        verdict = self.verifier.check(batch)
        waiting: dict[str, list[Candidate]] = {}
        for c in verdict.pending:
            waiting.setdefault(_signer(c), []).append(c)
        for c, _, key, _ in verdict.waiting:
            waiting.setdefault(key, []).append(c)
        unblocked = verdict.learned + verdict.unblocked
        for _ in range(self.ROUNDS):
            retry = [c for key in dict.fromkeys(unblocked) for c in waiting.pop(key, [])]
            if not retry:
                break
            again = self.verifier.check(retry)
            retried = {id(c.event) for c in retry}
            verdict.pending = [c for c in verdict.pending if id(c.event) not in retried] + again.pending
            verdict.waiting = [w for w in verdict.waiting if id(w[0].event) not in retried] + again.waiting
            for name in ("accepted", "rejected", "future", "retired", "facts"):
                getattr(verdict, name).extend(getattr(again, name))
            for c in again.pending:
                waiting.setdefault(_signer(c), []).append(c)
            for c, _, key, _ in again.waiting:
                waiting.setdefault(key, []).append(c)
            unblocked = again.learned + again.unblocked
        return verdict


_FACT_MARKS = (b'"agent.register"', b'"agent.admit"', b'"agent.rotate"', b'"agent.revoke"', b'"group.create"')
_FACT_TYPES = frozenset({"agent.register", "agent.admit", "agent.rotate", "agent.revoke", "group.create"})


def _facts_of(blobs: Blobs, trees: LayoutTrees, tree: Oid | None) -> list[Candidate]:
    """The lines of ``tree`` that teach keys and team facts (registrations, admissions,
    rotations, revocations, group creations: all in the ``events`` stream), in file order."""
    if tree is None:
        return []
    out = []
    for path, leaf in trees.log_files(tree):
        if not path.startswith(EVENTS_STREAM + "/"):
            continue
        for line in blobs.lines(leaf.oid):
            if not any(mark in line for mark in _FACT_MARKS):
                continue
            try:
                d = decode_line(line)
            except MalformedEvent:
                continue
            if d.get("type") in _FACT_TYPES:
                out.append(Candidate(path, line, d))
    return out


def _signer(c: Candidate) -> str:
    found = signature_of(c.event)
    return found[0] if found else "?"


def _describe(line: bytes) -> str:
    try:
        d = decode_line(line)
    except MalformedEvent:
        return "a line that is not an event"
    by = (d.get("sig") or {}).get("by") if isinstance(d.get("sig"), dict) else None
    chain = d.get("chain")
    where = f" #{chain['seq']}" if chain else ""
    return f"{d.get('type')} {d.get('event_id')} by {by or '?'}{where}"
