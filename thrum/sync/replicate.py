"""The ``a-sync`` worktree and its git remote: commit, fetch, merge, push (`Replicator`).

Rules:

1. Only the layout's log files are committed (`trees`), and a deleted log file is
   never committed as a deletion (the log is append-only). An idle worktree, or a
   sync with nothing new, makes no commit.
2. Cost follows what changed: only log files whose blob differs between our
   ``a-sync`` and the remote's are read and merged (`treemerge`), in chunks that
   each hold the log's lock briefly. The log's files are read and replaced through
   their owner (`logaccess.LogAccess`: the daemon's writer, or the offline cycle's).
   Trees are written for the touched directories only, never through the worktree
   index (which only keeps stat data).
3. The merged tree is committed with the remote tip as its only parent: history is
   linear, the remote keeps a single root, and every push is a fast-forward.
   Entries of the remote's tree that thrum ignores stay in it, counted by reason.
4. A push that lost a race in any form (non-fast-forward, a ref lock held by another
   pusher, a server's "cannot lock ref": `transport.lost_race`) returns False
   (`cycle.run_cycle` tries again, with jittered backoff); a lost race is never
   reported as an unreachable remote. Network operations go through
   `transport.session`: relative URLs, SSH config, credentials looked up when
   needed, the network timeout, one-line errors (:class:`AuthError`,
   :class:`RemoteUnreachable`), URLs shown without credentials.
5. ``a-sync`` moves by compare-and-swap from the head the step started from: another
   process that moved it meanwhile is never overwritten (the step fails, one line).

A :class:`Replicator` owns one git store (`gitstore.api.GitStore`: the repository's,
`gitstore.libgit2`, or a test's `gitstore.memory`); a store is not shared between
threads, so commit/fetch/merge/push take the replicator's own lock, and
``has_remote``/``remote_url``/``ignored_paths(wait=False)`` never wait for it.

A fetch or push over the network runs inside the ``network(what)`` the replicator was
made with, where the daemon may abandon the thread (`thrum.sync.gate`). It logs in with
the credentials it was made with, or with the ones a cycle hands each fetch and push
(the daemon's login of that cycle: `thrum.daemon.logins`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from thrum import durable
from thrum.events.layout import is_log_path

from . import PushRejected, SyncError
from .gate import no_gate
from .gitstore.api import EMPTY_TREE, Commit, FileMode, GitStore, Kind, Oid, Signature, object_id
from .gitstore.indexstats import IndexStats
from .gitstore.libgit2 import LibGit2Store
from .logaccess import LogAccess
from .merge.shard import Prefer
from .remotetip import MAX_INTAKE_BYTES, check_intake, check_sizes, log_commit
from .rollback import mark_pushed
from .transport.credentials import Credentials
from .transport.endpoint import resolved_url
from .transport.urls import parse_url, redact_url
from .treemerge import KeyCache, MergeOutcome, TreeMerge, lines_ahead
from .trees import LayoutTrees, Leaf
from .worktree import SYNC_BRANCH, SYNC_REF, tracking_ref, worktree_intact

logger = logging.getLogger(__name__)

__all__ = ["CommitResult", "FetchResult", "Replicator"]


@dataclass
class CommitResult:
    """The last local commit of pending appends."""

    commit: Oid
    paths: list[str]


@dataclass
class FetchResult:
    """The last fetch: the remote tip of ``a-sync`` (None when the remote has none)."""

    tip: Oid | None
    url: str
    at: float  # time.time()


class Replicator:
    """Commit, fetch, merge and push the ``a-sync`` worktree at ``worktree_path``.

    ``prefer`` resolves a line both sides hold with different bytes (`merge.Prefer`;
    default: the remote's copy); the trust layer sets it to keep the copy that verifies.
    ``store`` is the git store to use (default: the repository's, opened at
    ``worktree_path``; tests of the cycle's logic pass a `gitstore.memory.MemoryStore`).
    ``credentials``: the login of a fetch or push not given its own; ``network``: wraps
    each fetch and push (default `gate.no_gate`; the daemon's gate and request count).

    Raises:
        SyncError: ``worktree_path`` is not the a-sync worktree.
    """

    def __init__(
        self,
        worktree_path: os.PathLike[str] | str,
        remote_name: str = "origin",
        credentials: Credentials | None = None,
        author_name: str = "thrum",
        author_email: str = "thrum@localhost",
        prefer: Prefer | None = None,
        max_intake_bytes: int = MAX_INTAKE_BYTES,
        store: GitStore | None = None,
        network: Callable[[str], AbstractContextManager[object]] = no_gate,
    ) -> None:
        self.worktree_path = Path(worktree_path).resolve()
        self.max_intake_bytes = max_intake_bytes
        self.remote_name = remote_name
        self.credentials = credentials
        self.author_name = author_name
        self.author_email = author_email
        self.prefer = prefer
        self.last_commit: CommitResult | None = None
        self.last_fetch: FetchResult | None = None
        self._mutex = threading.RLock()
        self._keys = KeyCache()
        self._ignored: dict[str, int] | None = None
        self.network = network  # see the module docstring
        self._disk: LibGit2Store | None = None
        if store is None:
            self._disk = store = _open_worktree(self.worktree_path)
        self.store: GitStore = store
        if store.ref(SYNC_REF) is None:
            raise SyncError(f"branch {SYNC_BRANCH} is missing; run ensure_sync_worktree first")
        if store.symbolic_target("HEAD") != SYNC_REF:  # e.g. the user's own checkout
            raise SyncError(
                f"{self.worktree_path} does not have {SYNC_BRANCH} checked out; it is not the sync worktree"
            )
        self.trees = LayoutTrees(store)
        self.index = IndexStats(store, self._mutex)  # flushed by whoever ends with the replicator
        # where a relative remote path starts: the main checkout
        self._base = self._disk.base_dir if self._disk is not None else self.worktree_path
        durable.remove_temps(self.worktree_path)  # left by a crash in the middle of a merge

    def _signature(self) -> Signature:
        return Signature(self.author_name, self.author_email, int(time.time()), _utc_offset_minutes())

    def _head(self) -> Commit:
        head = self.store.ref(SYNC_REF)
        if head is None:
            raise SyncError(f"branch {SYNC_BRANCH} is missing; run ensure_sync_worktree first")
        return self.store.commit(head)

    def _move_ref(self, oid: Oid, message: str, expected: Oid) -> None:
        """Move ``a-sync`` from ``expected`` (the head this step started from) to ``oid``.

        Raises:
            SyncError: it moved meanwhile (another thrum process on this repository).
        """
        if not self.store.update_ref(SYNC_REF, oid, message, expected=expected):
            raise SyncError(
                f"branch {SYNC_BRANCH} moved while this sync step ran (another thrum process on this "
                f"repository?); nothing was lost: the next sync starts from where it is now"
            )

    def _login(self, given: Credentials | None) -> Credentials | None:
        return given if given is not None else self.credentials

    def _require_remote(self) -> None:
        if self.store.remote_url(self.remote_name) is None:
            raise SyncError(f"no remote named {self.remote_name} is configured")

    @property
    def common_dir(self) -> Path:
        """The repository's common git dir (its object store is the one syncs fill).

        Raises:
            SyncError: the store is not a repository on disk (a test's fake).
        """
        if self._disk is None:
            raise SyncError("this replicator's store is not a repository on disk")
        return self._disk.common_dir

    def healthy(self) -> bool:
        """False when the worktree (directory, ``.git`` link or the repository's record of it) broke."""
        return self._disk is None or worktree_intact(self.worktree_path, self._disk.git_dir)

    def has_remote(self) -> bool:
        """True when the repository has a remote named ``remote_name``. Never blocks."""
        return self.remote_name in self.store.remote_names()

    def _configured_url(self, push: bool = False) -> str | None:
        url = self.store.remote_url(self.remote_name, push=push)
        return None if url is None else resolved_url(url, self._base)

    def remote_url(self) -> str | None:
        """The remote's URL (credentials redacted), or None when there is no such remote. Never blocks."""
        return None if (url := self._configured_url()) is None else redact_url(url)

    def _where(self) -> str:
        """The remote as messages name it: ``remote origin (/srv/team.git)``."""
        return f"remote {self.remote_name} ({self.remote_url()})"

    def path_remote(self) -> Path | None:
        """The remote's directory when it is a repository on this machine, else None."""
        url = self._configured_url()
        if url is None:
            return None
        parsed = parse_url(url, self._base)
        return Path(parsed.path) if parsed.kind == "local" and parsed.path else None

    def ignored_paths(self, wait: bool = True) -> dict[str, int] | None:
        """Entries of the remote's ``a-sync`` tree (as of the last merge; before one, of
        ours, counted under the lock) that thrum ignores, by reason. ``wait=False``: None
        (unknown) rather than wait for a cycle, which may hold the lock for a slow fetch."""
        if self._ignored is None:
            if not self._mutex.acquire(blocking=wait):
                return None
            try:
                if self._ignored is None:
                    self._ignored = self.trees.ignored(self._head().tree)
            finally:
                self._mutex.release()
        return dict(self._ignored)

    # -- commit

    def commit_pending(self, log: LogAccess) -> bool:
        """Commit changed log files; True when a commit was made.

        The files come from ``log.appended()`` (None: git is asked which files changed),
        read under ``log.locked()``, hashed and committed outside it. When the commit
        fails, the files taken are given back (``log.not_committed``).
        """
        with self._mutex:
            self.store.refresh()  # a repack may have deleted packs under the store
            with log.locked():
                taken = log.appended()
                snapshot = self._snapshot(log, taken)
            try:
                return self._commit(snapshot)
            except Exception:
                if taken:
                    with log.locked():
                        log.not_committed(taken)
                raise

    def _snapshot(self, log: LogAccess, paths: list[str] | None) -> dict[str, tuple[bytes, os.stat_result]]:
        if paths is None:
            candidates = [p for p in self.store.changed_files() if is_log_path(p)]
        else:
            candidates = sorted({p for p in (self._relative(p) for p in paths) if p is not None})
        snapshot: dict[str, tuple[bytes, os.stat_result]] = {}
        for rel in candidates:
            try:  # never through a link: its target is not ours to publish
                found = log.read(rel)
            except OSError as exc:
                logger.warning("not committing %s: %s", rel, exc)
                continue
            if found is not None:
                snapshot[rel] = found
        return snapshot

    def _commit(self, snapshot: dict[str, tuple[bytes, os.stat_result]]) -> bool:
        head = self._head()
        files: dict[str, Leaf] = {}
        index_files: dict[str, tuple[Oid, os.stat_result]] = {}
        batch = self.store.batch()
        for rel, (data, st) in snapshot.items():
            oid = object_id(Kind.BLOB, data)
            if self.trees.leaf_at(head.tree, rel) != Leaf(oid, int(FileMode.BLOB)):
                batch.add(oid, Kind.BLOB, data)
                files[rel] = Leaf(oid, int(FileMode.BLOB))
            index_files[rel] = (oid, st)
        tree = self.trees.with_files(head.tree, files, batch)
        if tree == head.tree:
            self.index.record(index_files)  # refresh stat data so the next status is cheap
            return False
        changed = sorted(files)
        message = f"thrum: record events in {len(changed)} file(s)\n\n" + _listed(changed)
        oid = batch.commit(tree, [head.id], self._signature(), message)
        self._move_ref(oid, "thrum: commit pending events", head.id)
        self.index.record(index_files)
        self.last_commit = CommitResult(commit=oid, paths=changed)
        return True

    def _relative(self, path: str | os.PathLike[str]) -> str | None:
        p = Path(path)
        if p.is_absolute():
            try:
                p = p.resolve().relative_to(self.worktree_path)
            except ValueError:
                return None
        rel = PurePosixPath(*p.parts).as_posix()
        return rel if is_log_path(rel) else None

    # -- fetch

    def fetch(self, credentials: Credentials | None = None) -> Oid | None:
        """Fetch ``a-sync`` from the remote; its tip, or None when the remote has none.
        ``credentials``: this fetch's login (None: the replicator's own).

        Raises:
            AuthError: credentials missing or refused.
            RemoteUnreachable: no such path / host, connection refused, timeout.
            SyncError: no such remote configured.
        """
        with self._mutex:
            self.store.refresh()
            self._require_remote()
            url = redact_url(self._configured_url() or "") or ""  # a relative path: from the main checkout
            tracking = tracking_ref(self.remote_name)
            with self.network("fetch"):  # logins, SSH settings, a path remote's look, timeout, errors: the store's
                heads = self.store.fetch(self.remote_name, [f"+{SYNC_REF}:{tracking}"], self._login(credentials))
            tip = heads.get(SYNC_REF)
            if tip is None:
                self.store.delete_ref(tracking)  # the remote dropped its branch (or never had it)
            self.last_fetch = FetchResult(tip=tip, url=url, at=time.time())
            return tip

    # -- merge

    def merge(self, remote_tip: Oid | None, log: LogAccess) -> MergeOutcome:
        """Merge the remote tip's log files into ours and commit on top of the remote tip.

        Only log files whose blob differs between the two trees are read; each is
        merged with the current worktree file (which may hold appends not yet
        committed), in chunks that each hold ``log.locked()`` and hand what they wrote
        and received to ``log.apply_remote``.
        """
        with self._mutex:
            head = self._head()
            if remote_tip == head.id:
                return MergeOutcome(head=head.id)
            if remote_tip is None:  # the remote has no a-sync yet: our push creates it
                return MergeOutcome(head=head.id, ahead=True, sent=self.ahead_of(None, log))
            theirs = log_commit(self.store, self.trees, remote_tip, self._where())
            if self.store.is_ancestor(remote_tip, head.id):
                return MergeOutcome(head=head.id, ahead=True, sent=self.ahead_of(remote_tip, log))
            return self._merge_into(head, theirs, log)

    def ahead_of(self, remote_tip: Oid | None, log: LogAccess) -> int:
        """Lines our ``a-sync`` holds beyond ``remote_tip`` (what a push adds there)."""
        with self._mutex:
            head = self._head()
            if remote_tip == head.id:
                return 0
            try:
                remote_tree = self.store.commit(remote_tip).tree if remote_tip is not None else EMPTY_TREE
            except (KeyError, ValueError):
                remote_tree = EMPTY_TREE
            return lines_ahead(self.trees, log, remote_tree, head.tree)

    def _merge_into(self, head: Commit, theirs: Commit, log: LogAccess) -> MergeOutcome:
        oversized: list[tuple[str, int]] = []
        changes = self.trees.changes(head.tree, theirs.tree, oversized)
        check_sizes(oversized, self._where())  # a tip is taken whole or not at all (remotetip rule 3)
        check_intake(self.trees, changes, self.max_intake_bytes, self._where())
        batch = self.store.batch()
        merger = TreeMerge(self.store, batch, log, self._keys, self.prefer)
        outcome, files, stats = merger.run(changes, self.trees.size)
        remote_leaves = {c.path: c.new for c in changes}
        ours = {path: leaf for path, leaf in files.items() if leaf != remote_leaves.get(path)}
        tree = self.trees.with_files(theirs.tree, ours, batch)
        if tree == theirs.tree:
            new_head = theirs.id
            outcome.fast_forward = True
            self._move_ref(new_head, "thrum: fast-forward to remote a-sync", head.id)
        else:
            message = f"thrum: merge {outcome.sent} local event(s) onto remote a-sync\n\n" + _listed(sorted(ours))
            new_head = batch.commit(tree, [theirs.id], self._signature(), message)
            outcome.commits = 1
            self._move_ref(new_head, "thrum: merge remote a-sync", head.id)
        self.index.record({p: (files[p].oid, st) for p, st in stats.items() if p in files})
        self._ignored = self.trees.ignored(theirs.tree)  # what the remote holds that we do not take
        outcome.ignored = dict(self._ignored)
        outcome.head = new_head
        return outcome

    # -- push

    def known_tip_we_extend(self) -> Oid | None:
        """The remote's tip as the last fetch or push left it, when our ``a-sync`` is that
        tip or only adds to it (then a push can go first: `cycle.run_cycle`), else None."""
        with self._mutex:
            known = self.store.ref(tracking_ref(self.remote_name))
            if known is None:
                return None
            head = self._head().id
            return known if head == known or self.store.is_ancestor(known, head) else None

    def head_id(self) -> Oid:
        with self._mutex:
            return self._head().id

    def push(self, onto: Oid | None = None, credentials: Credentials | None = None) -> bool:
        """Push ``a-sync``; False when the remote moved first (non-fast-forward), or, with
        ``onto``, when the remote's branch is not at that tip (nothing is sent then).
        ``credentials``: this push's login (None: the replicator's own).

        Does nothing (and returns True) when the last fetch saw our tip already.

        Raises:
            AuthError, RemoteUnreachable: as for :meth:`fetch`.
            PushRejected: the remote refused for another reason (a hook, permissions).
        """
        with self._mutex:
            head = self._head().id
            if onto is None and self.last_fetch is not None and self.last_fetch.tip == head:
                mark_pushed(self.store, head)
                return True
            self._require_remote()
            url = redact_url(self._configured_url(push=True) or "") or ""
            with self.network("push"):
                outcome = self.store.push(self.remote_name, SYNC_REF, self._login(credentials), expected=onto)
            if outcome.refused is not None:
                raise PushRejected(f"{url} refused the push of {SYNC_BRANCH}: {outcome.refused}")
            if not outcome.landed:
                return False
            self.last_fetch = FetchResult(tip=head, url=url, at=time.time())
            mark_pushed(self.store, head)
            # the remote's tip as we left it (`remoteview.RemoteView.pending`): libgit2's push may have moved it
            if self.store.ref(tracking := tracking_ref(self.remote_name)) != head:
                self.store.update_ref(tracking, head, "thrum: push a-sync")
            return True


def _listed(paths: list[str], most: int = 50) -> str:
    """The paths a commit touched, one a line, at most ``most``: 11,470 made a 360 KiB commit read
    ~1 ms each time (docs/design/decisions.md, "What a sync cycle pays for around libgit2's transport")."""
    more = f"... and {len(paths) - most} more\n" if len(paths) > most else ""
    return "".join(p + "\n" for p in paths[:most]) + more


def _open_worktree(path: Path) -> LibGit2Store:
    """The repository's store, opened at the a-sync worktree ``path`` (and only there)."""
    try:
        store = LibGit2Store(path)
    except SyncError as exc:
        raise SyncError(f"{path} is not the {SYNC_BRANCH} worktree: {exc}") from exc
    if store.workdir is None or store.workdir.resolve() != path:
        raise SyncError(f"{path} is not the {SYNC_BRANCH} worktree")
    (store.git_dir / "thrum-pack.config").unlink(missing_ok=True)  # the per-handle tuning of old
    return store


def _utc_offset_minutes() -> int:
    """This machine's offset from UTC now, in minutes (what libgit2's default signature records)."""
    offset = time.localtime().tm_gmtoff
    return int(offset // 60) if offset is not None else 0
