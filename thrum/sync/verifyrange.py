"""``thrum verify``: judge a range of ``a-sync`` as every replica would, on the remote's side.

A replica quarantines what it must not apply, but only after the push landed: every
other replica then has to judge (and store) it too, and a fresh clone sees whatever
was left. A pre-receive hook on a self-hosted server, or a required CI check on a
forge, can refuse such a push first (issue 25, item 7). Rules:

1. The range is the log files that differ between ``old`` and ``new`` (commits of
   ``a-sync``; ``old`` absent or all zeros: from nothing). Bare repositories are fine;
   in a pre-receive hook the pushed objects are still in git's quarantine directory
   (``GIT_OBJECT_DIRECTORY``), which is read as well.
2. A line is *bad* when a replica would refuse it: malformed, in another agent's file
   (``forged``), unsigned, not verifying, of a signer no registration names
   (``unknown-signer``), signed for another log (``foreign-log``), dated ahead
   (``future``), a second registration of a name with another key (``key-conflict``);
   the same verifier as the daemon's judges it (`thrum.trust.verify`), seals included,
   so a 10,000-line push costs a few verifications per writer.
3. A line of ``old`` that ``new`` no longer holds is bad too (``removed``): history is
   append-only, and a replica would only push it back.
4. Keys: those the team root names (admins, members), then each name's first
   registration in ``old`` (trust on first use, in file order), then the range's own.
5. One line per bad line, ``path:line: kind: reason``; the exit status says whether
   there was any (the CLI).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

from ..errors import ThrumError
from ..events.codec import MalformedEvent, decode_line
from ..events.shards import ShardRule, is_log_path
from ..events.shards import EVENTS_STREAM
from ..trust.binding import LogBinding
from ..trust.keys import PublicKey
from ..trust.ring import KeyRing
from ..trust.verify import Candidate, Verifier
from . import SyncError
from .gitstore.api import Commit, GitStore, Oid
from .gitstore.libgit2 import LibGit2Store
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


def committed_root(
    repo_path: os.PathLike[str] | str, remote: str = "origin"
) -> tuple[dict[str, PublicKey], str | None]:
    """(admin and member keys, log id) of the team root committed on the normal branch,
    or ({}, None) without one: the keys a range is judged against besides OLD's registrations.

    Raises:
        ThrumError: the root is there but cannot be used (one line).
    """
    committed = read_committed_root(repo_path, remote)
    if committed.error:
        raise ThrumError(f"the team root cannot be used: {committed.error}")
    root = committed.root
    if root is None:
        return {}, None
    return {**root.members, **root.admins}, root.log_id


def committed_log_id(repo_path: os.PathLike[str] | str, remote: str = "origin") -> str | None:
    """The committed root's log id, or None (no root, or one that cannot be used: logged)."""
    try:
        return committed_root(repo_path, remote)[1]
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
    root_keys: dict[str, PublicKey] | None = None,
    log_id: str | None = None,
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
    out = RangeVerdict(
        old=str(old_commit.id) if old_commit else None,
        new=str(new_commit.id) if new_commit else None,
        log_id=log_id,
    )
    trees = LayoutTrees(repo)
    old_tree = old_commit.tree if old_commit else None
    new_tree = new_commit.tree if new_commit else None
    ring = KeyRing(None)
    for name, key in sorted((root_keys or {}).items()):
        ring.learn(name, key)
    verifier = Verifier(ring, skew_s=skew_s, binding=LogBinding(log_id))
    _learn_registrations(repo, trees, old_tree, verifier)

    batch: list[Candidate] = []
    where: dict[int, tuple[str, int]] = {}  # id(candidate line) -> (path, line number)
    for change in trees.changes(old_tree, new_tree):
        out.files += 1
        old_lines = _lines(repo, change.old.oid) if change.old is not None else []
        new_lines = _lines(repo, change.new.oid) if change.new is not None else []
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
            c = Candidate(change.path, line, d)
            where[id(c.line)] = (change.path, n)
            batch.append(c)
    verdict = verifier.check(batch)
    for r in verdict.rejected:
        path, n = where.get(id(r.line), (r.shard, 0))
        out.findings.append(Finding(path, n, r.kind, r.reason))
    for c in verdict.pending:
        path, n = where.get(id(c.line), (c.shard, 0))
        signer = (c.event.get("sig") or {}).get("by", "?") if isinstance(c.event.get("sig"), dict) else "?"
        out.findings.append(Finding(path, n, "unknown-signer", f"no registration names a key for {signer}"))
    for c, _at in verdict.future:
        path, n = where.get(id(c.line), (c.shard, 0))
        out.findings.append(Finding(path, n, "future", f"dated more than {skew_s:g} s ahead of this clock"))
    out.findings.sort(key=lambda f: (f.path, f.line))
    out.seconds = time.monotonic() - start
    return out


def _lines(store: GitStore, oid: Oid) -> list[bytes]:
    return [line for line in store.read(oid)[1].split(b"\n") if line]


def _describe(line: bytes) -> str:
    try:
        d = decode_line(line)
    except MalformedEvent:
        return "a line that is not an event"
    by = (d.get("sig") or {}).get("by") if isinstance(d.get("sig"), dict) else None
    chain = d.get("chain")
    where = f" #{chain['seq']}" if chain else ""
    return f"{d.get('type')} {d.get('event_id')} by {by or '?'}{where}"


def _learn_registrations(repo: GitStore, trees: LayoutTrees, tree: Oid | None, verifier: Verifier) -> None:
    """Trust on first use over ``old``: each name's first self-signed registration, in file order."""
    if tree is None:
        return
    batch = []
    for change in trees.changes(None, tree):
        if not change.path.startswith(EVENTS_STREAM + "/") or change.new is None:
            continue
        for line in _lines(repo, change.new.oid):
            if b'"agent.register"' not in line:
                continue
            try:
                d = decode_line(line)
            except MalformedEvent:
                continue
            if d.get("type") == "agent.register":
                batch.append(Candidate(change.path, line, d))
    verifier.check(batch)
