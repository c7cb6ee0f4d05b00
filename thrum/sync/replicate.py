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

A :class:`Replicator` owns one ``pygit2.Repository``; pygit2 objects are not safe to
share between threads, so commit/fetch/merge/push take the replicator's own lock, and
``has_remote``/``remote_url``/``ignored_paths(wait=False)`` never wait for it.

A fetch or push over the network runs inside ``Replicator.network(what)``, where the
daemon may abandon the thread (`thrum.sync.gate`).
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

import pygit2
from pygit2.enums import FileMode, FileStatus, ObjectType

from thrum import nofollow
from thrum.events import is_log_path

from . import PushRejected, SyncError
from .gate import no_gate
from .gitstore.gitlib import EMPTY_TREE, IndexStats, PackWatch, objects_dir, open_repo, tune_pack_building
from .gitstore.objbatch import ObjectBatch
from .logaccess import LogAccess
from .merge.shard import Prefer
from .remotetip import MAX_INTAKE_BYTES, check_intake, check_sizes, log_commit
from .transport.credentials import Credentials
from .transport.credentials import translate as _translate
from .transport.endpoint import resolved_url
from .transport.session import Session, lost_race, session
from .transport.urls import main_worktree_dir, parse_url, redact_url
from .treemerge import KeyCache, MergeOutcome, TreeMerge, lines_ahead
from .trees import LayoutTrees, Leaf
from .rollback import mark_pushed
from .worktree import SYNC_BRANCH, SYNC_REF, tracking_ref, worktree_intact

logger = logging.getLogger(__name__)

__all__ = ["CommitResult", "FetchResult", "Replicator"]


_WT_CHANGED = FileStatus.WT_NEW | FileStatus.WT_MODIFIED | FileStatus.WT_TYPECHANGE


@dataclass
class CommitResult:
    """The last local commit of pending appends."""

    commit: pygit2.Oid
    paths: list[str]


@dataclass
class FetchResult:
    """The last fetch: the remote tip of ``a-sync`` (None when the remote has none)."""

    tip: pygit2.Oid | None
    url: str
    at: float  # time.time()


class Replicator:
    """Commit, fetch, merge and push the ``a-sync`` worktree at ``worktree_path``.

    ``prefer`` resolves a line both sides hold with different bytes (`merge.Prefer`;
    default: the remote's copy); the trust layer sets it to keep the copy that verifies.

    Raises:
        SyncError: ``worktree_path`` is not the a-sync worktree.
    """

    def __init__(
        self,
        worktree_path: os.PathLike | str,
        remote_name: str = "origin",
        credentials: Credentials | None = None,
        author_name: str = "thrum",
        author_email: str = "thrum@localhost",
        prefer: Prefer | None = None,
        max_intake_bytes: int = MAX_INTAKE_BYTES,
    ):
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
        self.network: Callable[[str], AbstractContextManager] = no_gate  # see the module docstring
        tune_pack_building()  # before the handle reads its config
        try:
            self.repo = open_repo(self.worktree_path)
        except pygit2.GitError as exc:
            raise SyncError(f"{self.worktree_path} is not the {SYNC_BRANCH} worktree: {exc}") from exc
        workdir = self.repo.workdir
        if workdir is None or Path(workdir).resolve() != self.worktree_path:
            raise SyncError(f"{self.worktree_path} is not the {SYNC_BRANCH} worktree")
        if self.repo.references.get(SYNC_REF) is None:
            raise SyncError(f"branch {SYNC_BRANCH} is missing; run ensure_sync_worktree first")
        if self.repo.lookup_reference("HEAD").target != SYNC_REF:  # e.g. the user's own checkout
            raise SyncError(
                f"{self.worktree_path} does not have {SYNC_BRANCH} checked out; it is not the sync worktree"
            )
        (Path(self.repo.path) / "thrum-pack.config").unlink(missing_ok=True)  # the per-handle tuning of old
        self.trees = LayoutTrees(self.repo)
        self._objects = objects_dir(self.repo)
        self._packs = PackWatch(self.repo, self._objects)  # consolidation deletes packs under us
        self.index = IndexStats(self.repo, self._mutex)  # flushed by whoever ends with the replicator
        self._common = self._objects.parent  # the repository's common dir: its config names the remotes
        self._base = main_worktree_dir(self._common)  # where a relative remote path starts
        nofollow.remove_temps(self.worktree_path)  # left by a crash in the middle of a merge

    def _signature(self) -> pygit2.Signature:
        return pygit2.Signature(self.author_name, self.author_email)

    def _head(self) -> pygit2.Commit:
        return self.repo[self.repo.references[SYNC_REF].target]

    def _move_ref(self, oid: pygit2.Oid, message: str) -> None:
        self.repo.create_reference_direct(SYNC_REF, oid, True, message=message)

    def _remote(self) -> pygit2.Remote:
        try:
            return self.repo.remotes[self.remote_name]
        except KeyError:
            raise SyncError(f"no remote named {self.remote_name} is configured") from None

    @property
    def common_dir(self) -> Path:
        """The repository's common git dir (its object store is the one syncs fill)."""
        return self._common

    def healthy(self) -> bool:
        """False when the worktree (directory, ``.git`` link or the repository's record of it) broke."""
        return worktree_intact(self.worktree_path, Path(self.repo.path))

    def has_remote(self) -> bool:
        """True when the repository has a remote named ``remote_name``. Never blocks."""
        return self.remote_name in set(open_repo(self._common).remotes.names())

    def _configured_url(self) -> str | None:
        repo = open_repo(self._common)
        try:
            return resolved_url(repo.remotes[self.remote_name].url or "", self._base)
        except KeyError:
            return None

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
                    self._ignored = self.trees.ignored(self._head().tree_id)
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
            self._packs.check()
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
            status = self.repo.status(untracked_files="all")
            candidates = sorted(p for p, flags in status.items() if flags & _WT_CHANGED and is_log_path(p))
        else:
            candidates = sorted({p for p in (self._relative(p) for p in paths) if p is not None})
        snapshot = {}
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
        index_files = {}
        batch = ObjectBatch(self._objects)
        for rel, (data, st) in snapshot.items():
            oid = pygit2.hash(data)
            if self.trees.leaf_at(head.tree_id, rel) != Leaf(oid, int(FileMode.BLOB)):
                batch.add(oid, ObjectType.BLOB, data)
                files[rel] = Leaf(oid, int(FileMode.BLOB))
            index_files[rel] = (oid, st)
        tree = self.trees.with_files(head.tree_id, files, batch)
        if tree == head.tree_id:
            self.index.record(index_files)  # refresh stat data so the next status is cheap
            return False
        changed = sorted(files)
        message = f"thrum: record events in {len(changed)} file(s)\n\n" + "".join(p + "\n" for p in changed)
        oid = batch.commit(tree, [head.id], self._signature(), message)
        self._move_ref(oid, "thrum: commit pending events")
        self.index.record(index_files)
        self.last_commit = CommitResult(commit=oid, paths=changed)
        return True

    def _relative(self, path: str | os.PathLike) -> str | None:
        p = Path(path)
        if p.is_absolute():
            try:
                p = p.resolve().relative_to(self.worktree_path)
            except ValueError:
                return None
        rel = PurePosixPath(*p.parts).as_posix()
        return rel if is_log_path(rel) else None

    # -- fetch

    def fetch(self) -> pygit2.Oid | None:
        """Fetch ``a-sync`` from the remote; its tip, or None when the remote has none.

        Raises:
            AuthError: credentials missing or refused.
            RemoteUnreachable: no such path / host, connection refused, timeout.
            SyncError: no such remote configured.
        """
        with self._mutex:
            self._packs.check()
            remote = self._remote()
            url = resolved_url(remote.url or "", self._base)  # a relative path: from the main checkout
            tracking = f"refs/remotes/{self.remote_name}/{SYNC_BRANCH}"
            try:  # credentials, SSH settings, a path remote's look, timeout, errors: transport.session
                with (
                    self.network("fetch"),
                    session(self.repo, self.remote_name, self._base, self.credentials) as net,
                ):
                    net.remote.fetch([f"+{SYNC_REF}:{tracking}"], callbacks=net.callbacks, proxy=True)
                    heads = net.remote.list_heads(connect=False)
                tip = next((h.oid for h in heads if h.name == SYNC_REF), None)
            except SyncError:
                raise
            except Exception as exc:  # noqa: BLE001 - translated at this boundary
                raise _translate(exc, self.remote_name, redact_url(url)) from exc
            if tip is None and self.repo.references.get(tracking) is not None:
                self.repo.references.delete(tracking)  # the remote dropped its branch
            self.last_fetch = FetchResult(tip=tip, url=redact_url(url), at=time.time())
            return tip

    # -- merge

    def merge(self, remote_tip: pygit2.Oid | None, log: LogAccess) -> MergeOutcome:
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
            theirs = log_commit(self.repo, self.trees, remote_tip, self._where())
            if self.repo.descendant_of(head.id, remote_tip):
                return MergeOutcome(head=head.id, ahead=True, sent=self.ahead_of(remote_tip, log))
            return self._merge_into(head, theirs, log)

    def ahead_of(self, remote_tip: pygit2.Oid | None, log: LogAccess) -> int:
        """Lines our ``a-sync`` holds beyond ``remote_tip`` (what a push adds there)."""
        with self._mutex:
            head = self._head()
            if remote_tip == head.id:
                return 0
            try:
                remote_tree = self.repo[remote_tip].tree_id if remote_tip is not None else EMPTY_TREE
            except KeyError:
                remote_tree = EMPTY_TREE
            return lines_ahead(self.trees, log, remote_tree, head.tree_id)

    def _merge_into(self, head: pygit2.Commit, theirs: pygit2.Commit, log: LogAccess) -> MergeOutcome:
        oversized: list[tuple[str, int]] = []
        changes = self.trees.changes(head.tree_id, theirs.tree_id, oversized)
        check_sizes(oversized, self._where())  # a tip is taken whole or not at all (remotetip rule 3)
        check_intake(self.trees, changes, self.max_intake_bytes, self._where())
        batch = ObjectBatch(self._objects)
        merger = TreeMerge(self.repo, batch, log, self._keys, self.prefer)
        outcome, files, stats = merger.run(changes, self.trees.size)
        remote_leaves = {c.path: c.new for c in changes}
        ours = {path: leaf for path, leaf in files.items() if leaf != remote_leaves.get(path)}
        tree = self.trees.with_files(theirs.tree_id, ours, batch)
        if tree == theirs.tree_id:
            new_head = theirs.id
            outcome.fast_forward = True
            self._move_ref(new_head, "thrum: fast-forward to remote a-sync")
        else:
            message = f"thrum: merge {outcome.sent} local event(s) onto remote a-sync\n\n" + "".join(
                p + "\n" for p in sorted(ours)
            )
            new_head = batch.commit(tree, [theirs.id], self._signature(), message)
            outcome.commits = 1
            self._move_ref(new_head, "thrum: merge remote a-sync")
        self.index.record({p: (files[p].oid, st) for p, st in stats.items() if p in files})
        self._ignored = self.trees.ignored(theirs.tree_id)  # what the remote holds that we do not take
        outcome.ignored = dict(self._ignored)
        outcome.head = new_head
        return outcome

    # -- push

    def known_tip_we_extend(self) -> pygit2.Oid | None:
        """The remote's tip as the last fetch or push left it, when our ``a-sync`` is that
        tip or only adds to it (then a push can go first: `cycle.run_cycle`), else None."""
        with self._mutex:
            tracking = self.repo.references.get(tracking_ref(self.remote_name))
            if tracking is None:
                return None
            head, known = self._head().id, tracking.target
            return known if head == known or self.repo.descendant_of(head, known) else None

    def head_id(self) -> pygit2.Oid:
        with self._mutex:
            return self._head().id

    def push(self, onto: pygit2.Oid | None = None) -> bool:
        """Push ``a-sync``; False when the remote moved first (non-fast-forward), or, with
        ``onto``, when the remote's branch is not at that tip (nothing is sent then).

        Does nothing (and returns True) when the last fetch saw our tip already.

        Raises:
            AuthError, RemoteUnreachable: as for :meth:`fetch`.
            PushRejected: the remote refused for another reason (a hook, permissions).
        """
        with self._mutex:
            head = self.repo.references[SYNC_REF].target
            if onto is None and self.last_fetch is not None and self.last_fetch.tip == head:
                mark_pushed(self.repo, head)
                return True
            remote = self._remote()
            url = redact_url(resolved_url(remote.push_url or remote.url or "", self._base))
            with (
                self.network("push"),
                session(self.repo, self.remote_name, self._base, self.credentials, push=True) as net,
            ):
                callbacks = net.callbacks
                if onto is not None:
                    callbacks.expected[SYNC_REF] = onto
                try:
                    net.remote.push([f"{SYNC_REF}:{SYNC_REF}"], callbacks=callbacks, proxy=True)
                except Exception as exc:  # noqa: BLE001 - a lost race is not an error
                    if not lost_race(str(exc)):
                        raise
                    logger.info("push of %s to %s lost a race: %s", SYNC_BRANCH, url, exc)
                    return False
                for _ref, message in callbacks.rejected:
                    if lost_race(message):
                        return False
                    raise PushRejected(f"{url} refused the push of {SYNC_BRANCH}: {message}")
                if net.endpoint.kind == "local" and not self._landed(net, head):
                    logger.info("push of %s to %s was overwritten by another pusher", SYNC_BRANCH, url)
                    return False
            self.last_fetch = FetchResult(tip=head, url=url, at=time.time())
            mark_pushed(self.repo, head)
            # the remote's tip as we left it: what `remoteview.RemoteView.pending` counts from
            self.repo.create_reference_direct(tracking_ref(self.remote_name), head, True, message="thrum: push a-sync")
            return True

    def _landed(self, net: Session, head: pygit2.Oid) -> bool:
        """Whether a path remote's branch holds ``head`` after our push (or a descendant of it).

        libgit2's local transport checks that a push is a fast-forward of the tip it saw,
        then moves the ref without comparing it again: a pusher racing us between the two
        is overwritten without a word. Reading the ref back tells; a push that did not
        land is a lost race, and the cycle fetches and merges again.
        """
        heads = {h.name: h.oid for h in net.remote.list_heads(callbacks=net.callbacks)}
        tip = heads.get(SYNC_REF)
        if tip == head:
            return True
        return tip is not None and self.repo.odb.exists(tip) and self.repo.descendant_of(tip, head)
