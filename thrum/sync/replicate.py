"""Replicate the ``a-sync`` worktree through a git remote: commit, fetch, merge, push.

Rules:

1. Only ``*.jsonl`` files are shards; nothing else in the worktree is committed,
   and a deleted shard is never committed as a deletion (the log is append-only).
2. An idle worktree makes no commit; a sync with nothing new makes no commit either.
3. Cost follows what changed: trees are compared by oid, and only shards whose blob
   differs between our ``a-sync`` and the remote's are read and merged. When one
   side only appended to a shard, only the appended lines are parsed (the merge's
   fast path, with a per-shard summary of keys kept between cycles), and the index
   entry is written from the known blob id instead of hashing the file again.
   A remote on a local filesystem is fetched from and pushed to by copying objects
   (``localremote``) instead of building packs.
4. The merged tree is committed with the remote tip as its only parent, so history
   is linear, the remote keeps a single root, and every push is a fast-forward.
5. A push that lost a race in any form (non-fast-forward, a ref lock held by another
   pusher, a server's "cannot lock ref") returns False; :func:`run_cycle` then
   fetches, merges and pushes again, a bounded number of times with jittered
   exponential backoff. A lost race is never reported as an unreachable remote.
6. Network operations go through ``transport.session``: relative URLs, SSH config,
   credentials looked up when needed, the network timeout, one-line errors.

A :class:`Replicator` owns one ``pygit2.Repository``; pygit2 objects are not safe to
share between threads, so commit/fetch/merge/push take the replicator's own lock, and
``has_remote``/``remote_url`` read through a private handle so they never wait.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import threading
import time
import zlib
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pygit2
from pygit2.enums import CredentialType, FileMode, FileStatus
from pygit2.ffi import C as _C
from pygit2.ffi import ffi as _ffi

from . import AuthError, PushRejected, RemoteUnreachable, SyncError, safefs, transport
from .credentials import Credentials, credentials_from_env, remote_callbacks
from .credentials import translate as _translate
from .localremote import _verified_blob, objects_dir, open_local_remote
from .merge import ShardKeys, merge_shard_fast, merge_shard_keyed
from .urls import redact_url
from .worktree import SYNC_BRANCH, SYNC_REF, is_log_path

log = logging.getLogger(__name__)

__all__ = [
    "AuthError",
    "CommitResult",
    "Credentials",
    "FetchResult",
    "MergeOutcome",
    "PushRejected",
    "RemoteUnreachable",
    "Replicator",
    "SyncError",
    "SyncReport",
    "credentials_from_env",
    "remote_callbacks",
    "run_cycle",
]

_TMP_PREFIX = safefs.TMP_PREFIX
_WT_CHANGED = FileStatus.WT_NEW | FileStatus.WT_MODIFIED | FileStatus.WT_TYPECHANGE


# --- results -----------------------------------------------------------------------


@dataclass
class CommitResult:
    """The last local commit of pending shard appends."""

    commit: pygit2.Oid
    paths: list[str]


@dataclass
class FetchResult:
    """The last fetch: the remote tip of ``a-sync`` (None when the remote has none)."""

    tip: pygit2.Oid | None
    url: str
    at: float  # time.time()


@dataclass
class MergeOutcome:
    """What one merge did. ``received_lines`` maps shard path to lines new to us."""

    head: pygit2.Oid | None = None
    received: int = 0
    sent: int = 0
    commits: int = 0
    fast_forward: bool = False  # ref moved to the remote tip, no commit needed
    ahead: bool = False  # we already contain the remote tip: nothing to merge
    received_lines: dict[str, list[bytes]] = field(default_factory=dict)


@dataclass
class SyncReport:
    """One sync cycle. ``pushed``: the remote holds our tip at the end of the cycle."""

    sent: int = 0
    received: int = 0
    commits: int = 0
    pushed: bool = False
    duration_s: float = 0.0
    received_lines: dict[str, list[bytes]] = field(default_factory=dict)
    remote: str | None = None
    remote_url: str | None = None
    attempts: int = 0
    error: str | None = None  # set when the push kept losing races


# --- the replicator ----------------------------------------------------------------


class Replicator:
    """Commit, fetch, merge and push the ``a-sync`` worktree at ``worktree_path``.

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
    ):
        self.worktree_path = Path(worktree_path).resolve()
        self.remote_name = remote_name
        self.credentials = credentials
        self.author_name = author_name
        self.author_email = author_email
        self.last_commit: CommitResult | None = None
        self.last_fetch: FetchResult | None = None
        self._mutex = threading.RLock()
        self._fetched_blobs: dict[str, bytes] = {}  # blob hex -> bytes inflated by the last direct fetch
        self._verified: set[str] = set()  # blobs the last direct fetch checked (kept or not)
        self._keys = _KeyCache()
        try:
            self.repo = pygit2.Repository(str(self.worktree_path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
        except pygit2.GitError as exc:
            raise SyncError(f"{self.worktree_path} is not the {SYNC_BRANCH} worktree: {exc}") from exc
        workdir = self.repo.workdir
        if workdir is None or Path(workdir).resolve() != self.worktree_path:
            raise SyncError(f"{self.worktree_path} is not the {SYNC_BRANCH} worktree")
        if self.repo.references.get(SYNC_REF) is None:
            raise SyncError(f"branch {SYNC_BRANCH} is missing; run ensure_sync_worktree first")
        if self.repo.lookup_reference("HEAD").target != SYNC_REF:  # e.g. the user's own checkout
            raise SyncError(f"{self.worktree_path} does not have {SYNC_BRANCH} checked out; "
                            f"it is not the sync worktree")
        _no_delta_search(self.repo)
        self._objects = objects_dir(self.repo)
        for stale in self.worktree_path.rglob(f"{_TMP_PREFIX}*"):  # left by a crash mid-merge
            if stale.is_symlink() or stale.is_file():
                stale.unlink(missing_ok=True)

    # -- helpers

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

    def _fresh(self) -> pygit2.Repository:
        """A private handle, so quick reads need not wait for a fetch holding the lock."""
        return pygit2.Repository(str(self.worktree_path), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)

    def has_remote(self) -> bool:
        """True when the repository has a remote named ``remote_name``. Never blocks."""
        return self.remote_name in set(self._fresh().remotes.names())

    def remote_url(self) -> str | None:
        """The remote's URL (credentials redacted), or None when there is no such remote. Never blocks."""
        repo = self._fresh()
        try:
            return redact_url(transport.resolved_url(repo, repo.remotes[self.remote_name].url or ""))
        except KeyError:
            return None

    # -- commit

    def commit_pending(self, paths: list[str] | None = None) -> bool:
        """Commit changed shard files; True when a commit was made.

        ``paths`` (relative to the worktree, or absolute inside it) names the shards
        that were appended to; ``None`` asks git which files changed.
        """
        with self._mutex:
            index = self.repo.index
            index.read(False)
            if paths is None:
                status = self.repo.status(untracked_files="all")
                candidates = [p for p, flags in status.items() if flags & _WT_CHANGED and _is_shard(p)]
            else:
                candidates = [p for p in (self._relative(p) for p in paths) if p is not None]
            for rel in candidates:
                if safefs.is_regular(self.worktree_path, rel):  # never a link: its target is not ours to publish
                    index.add(rel)
            tree = index.write_tree()
            head = self._head()
            if tree == head.tree_id:
                if candidates:
                    index.write()  # refresh stat data so the next status is cheap
                return False
            changed = sorted(_changed_paths(head.tree, self.repo[tree]))
            message = f"thrum: record events in {len(changed)} shard(s)\n\n" + "".join(p + "\n" for p in changed)
            sig = self._signature()
            oid = self.repo.create_commit(None, sig, sig, message, tree, [head.id])
            self._move_ref(oid, "thrum: commit pending events")
            index.write()
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
        return rel if _is_shard(rel) else None

    # -- fetch

    def fetch(self) -> pygit2.Oid | None:
        """Fetch ``a-sync`` from the remote; its tip, or None when the remote has none.

        Raises:
            AuthError: credentials missing or refused.
            RemoteUnreachable: no such path / host, connection refused, timeout.
            SyncError: no such remote configured.
        """
        with self._mutex:
            remote = self._remote()
            url = transport.resolved_url(self.repo, remote.url or "")  # a relative path: from the main checkout
            tracking = f"refs/remotes/{self.remote_name}/{SYNC_BRANCH}"
            self._fetched_blobs, self._verified = {}, set()
            try:
                local = open_local_remote(url)
                if local is not None:  # a path on this machine: copy objects, no pack
                    tip = local.tip(SYNC_REF)
                    if tip is not None:
                        stats = local.fetch_into(self.repo, tip, keep_bytes=KEEP_FETCHED_BYTES)
                        self._fetched_blobs = stats.blobs
                        self._verified = stats.verified
                        self.repo.create_reference_direct(tracking, tip, True, message="thrum: fetch a-sync")
                else:  # credentials, SSH config, timeout, errors: see transport.session
                    with transport.session(self.repo, self.remote_name, self.credentials) as net:
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

    def merge(self, remote_tip: pygit2.Oid | None) -> MergeOutcome:
        """Merge the remote tip's shards into ours and commit on top of the remote tip.

        Only shards whose blob differs between the two trees are read; each is merged
        with the current worktree file (which may hold appends not yet committed).
        """
        with self._mutex:
            head = self._head()
            if remote_tip == head.id:
                return MergeOutcome(head=head.id)
            if remote_tip is None:  # the remote has no a-sync yet: our push creates it
                empty = self.repo[self.repo.TreeBuilder().write()]
                return MergeOutcome(head=head.id, ahead=True, sent=self._count_ahead(empty, head.tree))
            try:
                theirs = self.repo[remote_tip]
            except KeyError:
                raise SyncError(f"remote tip {remote_tip} is not in the object store; fetch first") from None
            if self.repo.descendant_of(head.id, remote_tip):
                return MergeOutcome(head=head.id, ahead=True, sent=self._count_ahead(theirs.tree, head.tree))
            return self._merge_into(head, theirs)

    def _count_ahead(self, remote_tree: pygit2.Tree, local_tree: pygit2.Tree) -> int:
        """Lines our tree adds over the remote's, for the report (reads only file tails)."""
        total = 0
        for delta in local_tree.diff_to_tree(remote_tree).deltas:
            ours = _blob_size(self.repo, delta.old_file.id)
            theirs = _blob_size(self.repo, delta.new_file.id)
            if ours <= theirs:
                continue
            try:
                data = safefs.read_regular(self.worktree_path, delta.old_file.path)
            except (OSError, SyncError):
                continue
            if data is not None:
                total += data[theirs:ours].count(b"\n")
        return total

    def _merge_into(self, head: pygit2.Commit, theirs: pygit2.Commit) -> MergeOutcome:
        outcome = MergeOutcome()
        remote_tree = theirs.tree
        merged = pygit2.Index()
        merged.read_tree(remote_tree)
        touched: dict[str, pygit2.Oid | None] = {}
        jobs = []
        for path in sorted(_changed_paths(head.tree, remote_tree)):
            if not _is_safe(path):
                log.warning("ignoring unsafe path %r in the remote's %s", path, SYNC_BRANCH)
                continue
            if not _is_shard(path):  # kept in the tree, never written to the worktree
                log.warning("ignoring %s in the remote's %s: not a path of thrum's log", path, SYNC_BRANCH)
                continue
            entry = _entry(remote_tree, path)
            if entry is not None and entry.filemode not in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
                log.warning("ignoring %s in the remote's %s: not a regular file", path, SYNC_BRANCH)
                continue
            jobs.append((path, entry, self._keys.candidate(path)))
        # Reading files, inflating blobs, checking key summaries and writing the merged
        # files run in worker threads (they let go of the GIL); merging runs here, in order.
        with ThreadPoolExecutor(_WORKERS) as pool:
            writes: deque = deque()
            for (path, entry, _), (exists, local, remote, known_ok) in _in_order(pool, self._prepare, jobs):
                if local is None:  # a deleted shard is restored, never deleted (the log is append-only)
                    local = self._blob_at(head.tree, path)
                if remote is None:
                    remote = self.repo[entry.id].data if entry is not None else b""
                known = self._keys.take(path) if known_ok else None
                if not known_ok:
                    self._keys.drop(path)
                result, keys = self._merge_shard(remote, local, known)
                data = result.data
                if result.received:
                    outcome.received_lines[path] = result.received
                    outcome.received += len(result.received)
                outcome.sent += len(result.sent)
                if entry is None and not data and not exists:
                    continue
                if not exists or not _same_bytes(data, local):
                    # never in place: a crash must not leave a torn copy
                    writes.append(pool.submit(safefs.write_atomic, self.worktree_path, path, data))
                    while len(writes) > 2 * _WORKERS:
                        writes.popleft().result()
                if entry is not None and _same_bytes(data, remote):
                    oid = entry.id
                    merged.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
                else:
                    oid = self.repo.create_blob(data)
                    merged.add(pygit2.IndexEntry(path, oid, FileMode.BLOB))
                if keys is not None:
                    self._keys.store(path, oid, keys)
                touched[path] = oid
            while writes:  # every file is in place before the ref moves
                writes.popleft().result()
        self._fetched_blobs, self._verified = {}, set()
        tree = merged.write_tree(self.repo)
        if tree == remote_tree.id:
            new_head = theirs.id
            outcome.fast_forward = True
            self._move_ref(new_head, "thrum: fast-forward to remote a-sync")
        else:
            sig = self._signature()
            message = (f"thrum: merge {outcome.sent} local event(s) onto remote a-sync\n\n"
                       + "".join(p + "\n" for p in touched))
            new_head = self.repo.create_commit(None, sig, sig, message, tree, [theirs.id])
            outcome.commits = 1
            self._move_ref(new_head, "thrum: merge remote a-sync")
        self._sync_index(touched)
        outcome.head = new_head
        return outcome

    def _prepare(self, job) -> tuple[bool, bytes | None, bytes | None, bool]:
        """Worker thread, no pygit2: (file exists, its bytes, the remote blob's bytes or
        None, whether the shard's key summary still describes the file's first bytes)."""
        path, entry, candidate = job
        local = safefs.read_regular(self.worktree_path, path)  # never through a link
        exists = local is not None
        remote = self._blob_data(entry.id) if entry is not None else b""
        known_ok = False
        if candidate is not None and local is not None:
            oid_raw, n = candidate
            known_ok = _starts_with_blob(local, n, oid_raw)
        return exists, local, remote, known_ok

    def _merge_shard(self, remote: bytes, local: bytes, known: ShardKeys | None) -> tuple:
        """merge_shard(remote, local), through the fast path when one side only appended."""
        fast = merge_shard_fast(remote, local, known)
        if fast is not None:
            return fast
        return merge_shard_keyed(remote, local)

    def _blob_data(self, oid: pygit2.Oid) -> bytes | None:
        """A blob's bytes as the last fetch inflated them, else inflated (and checked) from
        our loose copy; None when it is packed (the caller asks libgit2). No pygit2 here."""
        hexs = str(oid)
        data = self._fetched_blobs.pop(hexs, None)
        if data is not None:
            return data
        try:
            with open(self._objects / hexs[:2] / hexs[2:], "rb") as f:
                raw = f.read()
        except OSError:
            return None
        if hexs in self._verified:  # our copy of a blob the fetch just checked
            data = zlib.decompress(raw)
            return data[data.index(b"\0") + 1:]
        try:
            return _verified_blob(oid, raw)
        except SyncError:
            return None  # let libgit2 say what is wrong with it

    def _blob_at(self, tree: pygit2.Tree, path: str) -> bytes:
        entry = _entry(tree, path)
        return entry.data if isinstance(entry, pygit2.Blob) else b""

    def _sync_index(self, touched: dict[str, pygit2.Oid | None]) -> None:
        """Point the worktree index at the new tree for the paths the merge touched.

        The merge knows each file's blob id (it wrote those bytes), so the entry is
        written with the file's stat data and that id: no file is hashed again.
        """
        index = self.repo.index
        index.read(False)
        for path, oid in touched.items():
            file = self.worktree_path / path
            if safefs.is_regular(self.worktree_path, path):
                if oid is None:
                    index.add(path)
                else:
                    _add_index_entry(index, path, oid, os.stat(file, follow_symlinks=False))
            elif path in index:
                index.remove(path)
        index.write()

    # -- push

    def push(self) -> bool:
        """Push ``a-sync``; False when the remote moved first (non-fast-forward).

        Does nothing (and returns True) when the last fetch saw our tip already.

        Raises:
            AuthError, RemoteUnreachable: as for :meth:`fetch`.
            PushRejected: the remote refused for another reason (a hook, permissions).
        """
        with self._mutex:
            head = self.repo.references[SYNC_REF].target
            if self.last_fetch is not None and self.last_fetch.tip == head:
                return True
            remote = self._remote()
            url = transport.resolved_url(self.repo, remote.push_url or remote.url or "")
            local = open_local_remote(url)
            if local is not None and local.bare:
                return self._push_local(local, head, redact_url(url))
            url = redact_url(url)
            with transport.session(self.repo, self.remote_name, self.credentials, push=True) as net:
                callbacks = net.callbacks
                try:
                    net.remote.push([f"{SYNC_REF}:{SYNC_REF}"], callbacks=callbacks, proxy=True)
                except Exception as exc:  # noqa: BLE001 - a lost race is not an error
                    if not _is_race(str(exc)):
                        raise
                    log.info("push of %s to %s lost a race: %s", SYNC_BRANCH, url, exc)
                    return False
            for _ref, message in callbacks.rejected:
                if _is_race(message):
                    return False
                raise PushRejected(f"{url} refused the push of {SYNC_BRANCH}: {message}")
            self.last_fetch = FetchResult(tip=head, url=url, at=time.time())
            return True

    def _push_local(self, local, head: pygit2.Oid, url: str) -> bool:
        """Push to a bare repository on this machine by copying objects (see ``localremote``)."""
        try:
            current = local.tip(SYNC_REF)
            if current != head:
                if current is not None and not (self.repo.odb.exists(current)
                                                and self.repo.descendant_of(head, current)):
                    return False  # not a fast-forward: the remote moved since our fetch
                if not local.push_from(self.repo, SYNC_REF, head, current):
                    return False
            self.repo.create_reference_direct(f"refs/remotes/{self.remote_name}/{SYNC_BRANCH}", head, True,
                                              message="thrum: push a-sync")
        except SyncError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            if _is_race(str(exc)):  # another pusher holds the remote's ref lock
                log.info("push of %s to %s lost a race: %s", SYNC_BRANCH, url, exc)
                return False
            raise _translate(exc, self.remote_name, url) from exc
        self.last_fetch = FetchResult(tip=head, url=url, at=time.time())
        return True


def run_cycle(
    replicator: Replicator,
    locked: Callable[[], AbstractContextManager],
    max_attempts: int = 24,
    backoff_s: float = 0.05,
    on_received: Callable[[MergeOutcome], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    paths: list[str] | None = None,
) -> SyncReport:
    """One sync: commit pending appends, then fetch / merge / push until the push lands.

    ``locked()`` returns a context manager that keeps the appender out; it is held for
    the commit and for each merge, never across network calls. ``on_received`` runs
    inside the locked merge section whenever a merge brought new lines, so the
    caller can fold them before appends resume. ``paths`` names the shards appended to
    since the last commit (None: ask git). Runs in a worker thread: it blocks.

    Raises:
        AuthError, RemoteUnreachable, PushRejected: see :class:`Replicator`; the
        local commit has been made by then.
    """
    start = time.monotonic()
    report = SyncReport()
    with locked():
        report.commits += int(replicator.commit_pending(paths))
    if not replicator.has_remote():
        report.duration_s = time.monotonic() - start
        return report
    report.remote = replicator.remote_name
    for attempt in range(1, max_attempts + 1):
        report.attempts = attempt
        tip = replicator.fetch()
        report.remote_url = replicator.last_fetch.url if replicator.last_fetch else None
        with locked():
            outcome = replicator.merge(tip)
            if on_received is not None and outcome.received:
                on_received(outcome)
        report.received += outcome.received
        for path, lines in outcome.received_lines.items():
            report.received_lines.setdefault(path, []).extend(lines)
        report.commits += outcome.commits
        report.sent = outcome.sent
        if replicator.push():
            report.pushed = True
            break
        if attempt < max_attempts:
            sleep(_backoff(backoff_s, attempt))
    else:
        report.error = (f"push to {report.remote} was rejected {max_attempts} times "
                        f"because others kept pushing; the next sync retries")
    report.duration_s = time.monotonic() - start
    return report


# --- small helpers -----------------------------------------------------------------


_PACK_CONFIG = """\
# Written by thrum; read only by thrum's own libgit2 handle, never by git itself.
# Shards are append-only files: deltas between different new blobs of one push
# save nothing, and searching for them dominates the cost of a push.
# (libgit2 1.9 reads its big-file threshold from pack.deltaCacheSize.)
[pack]
\tdeltaCacheSize = 1
\tbigFileThreshold = 1
"""


def _no_delta_search(repo: pygit2.Repository) -> None:
    """Turn off delta search for packs this handle builds (pushes), app-level only."""
    path = Path(repo.path) / "thrum-pack.config"
    try:
        if not path.is_file() or path.read_text() != _PACK_CONFIG:
            path.write_text(_PACK_CONFIG)
        # pygit2 1.21 hides add_file on a repository config; the base method is libgit2's
        # git_config_add_file_ondisk on that same config object.
        pygit2.Config.add_file(repo.config, str(path), pygit2.enums.ConfigLevel.APP, True)
    except (OSError, ValueError, pygit2.GitError) as exc:  # slower pushes, nothing worse
        log.warning("cannot tune pack building (%s); pushes will be slower", exc)


def _is_race(message: str) -> bool:
    """A push that lost to another pusher, in any of the forms servers and libgit2 say it."""
    low = message.lower()
    return any(s in low for s in (
        "non-fastforward", "non-fast-forward", "not present locally", "fetch first",
        "stale info", "failed to lock", "cannot lock ref", "reference already exists",
        "failed to update ref", "locked file", "unable to lock", "could not lock",
        "old reference value does not match", "incorrect old value",
    ))


BACKOFF_CAP_S = 2.0


def _backoff(base_s: float, attempt: int) -> float:
    """Exponential backoff with jitter, so replicas that lost the same race spread out."""
    return min(BACKOFF_CAP_S, base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)


def _is_safe(path: str) -> bool:
    parts = path.split("/")
    return all(p and p not in (".", "..") and p.lower() != ".git" and "\\" not in p for p in parts)


def _is_shard(path: str) -> bool:
    """Only the log's own paths are ever read or written."""
    return _is_safe(path) and is_log_path(path)


def _changed_paths(old: pygit2.Tree, new: pygit2.Tree) -> set[str]:
    paths = set()
    for delta in old.diff_to_tree(new).deltas:
        paths.add(delta.old_file.path)
        paths.add(delta.new_file.path)
    return paths


def _entry(tree: pygit2.Tree, path: str) -> pygit2.Object | None:
    try:
        return tree[path]
    except KeyError:
        return None


def _blob_size(repo: pygit2.Repository, oid: pygit2.Oid) -> int:
    if oid == _ZERO_OID:  # the side of a diff where the file does not exist
        return 0
    try:
        return repo.odb.read_header(oid)[1]
    except (KeyError, pygit2.GitError):
        return 0


_ZERO_OID = pygit2.Oid(hex="0" * 40)

KEEP_FETCHED_BYTES = 256 * 2**20  # inflated blobs a direct fetch hands to the merge (the rest is re-read)
_WORKERS = max(1, min(4, os.cpu_count() or 1))  # reading, inflating, hashing, writing: the GIL is let go


def _starts_with_blob(data: bytes, n: int, oid_raw: bytes) -> bool:
    """True when the first ``n`` bytes of ``data`` are a whole-line blob with id ``oid_raw``."""
    if n > len(data) or (n and data[n - 1:n] != b"\n"):
        return False
    h = hashlib.sha1(b"blob %d\0" % n)
    h.update(memoryview(data)[:n])
    return h.digest() == oid_raw


def _in_order(pool: ThreadPoolExecutor, fn, items: list, ahead: int = 0) -> Iterator:
    """(item, fn(item)) in order, computed by ``pool`` at most ``ahead`` items ahead."""
    ahead = ahead or _WORKERS + 1
    pending: deque = deque()
    it = iter(items)
    for item in it:
        pending.append((item, pool.submit(fn, item)))
        if len(pending) > ahead:
            break
    while pending:
        item, fut = pending.popleft()
        yield item, fut.result()
        nxt = next(it, _END)
        if nxt is not _END:
            pending.append((nxt, pool.submit(fn, nxt)))


_END = object()


def _same_bytes(a: bytes, b: bytes) -> bool:
    return a is b or (len(a) == len(b) and a == b)


def _add_index_entry(index: pygit2.Index, path: str, oid: pygit2.Oid, st: os.stat_result) -> None:
    """Add an index entry with the file's stat data and a known blob id (no hashing).

    pygit2's IndexEntry carries no stat data, so the entry is built for libgit2
    directly; with it, status and the next commit see the file as unchanged
    until it is appended to.
    """
    e = _ffi.new("git_index_entry *")
    e.ctime.seconds, e.ctime.nanoseconds = int(st.st_ctime) & 0x7FFFFFFF, st.st_ctime_ns % 1_000_000_000
    e.mtime.seconds, e.mtime.nanoseconds = int(st.st_mtime) & 0x7FFFFFFF, st.st_mtime_ns % 1_000_000_000
    e.dev, e.ino = st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF
    e.mode = int(FileMode.BLOB_EXECUTABLE if st.st_mode & 0o100 else FileMode.BLOB)
    e.uid, e.gid = st.st_uid & 0xFFFFFFFF, st.st_gid & 0xFFFFFFFF
    e.file_size = st.st_size & 0xFFFFFFFF
    _ffi.buffer(_ffi.addressof(e, "id"))[:] = oid.raw
    c_path = _ffi.new("char[]", path.encode("utf-8", "surrogateescape"))
    e.path = c_path
    if _C.git_index_add(index._index, e) != 0:  # noqa: SLF001 - pygit2 exposes no stat-aware add
        index.add(path)


class _KeyCache:
    """Per shard: the :class:`ShardKeys` of the bytes a merge left, by their blob id.

    A later merge of that shard checks that the file still starts with those bytes
    (one SHA-1 over them, no parsing) and then parses only what was appended since.
    Bounded by the number of keys held (8 bytes each), least recently used first out.
    """

    def __init__(self, max_keys: int = 4_000_000):
        self.max_keys = max_keys
        self._items: OrderedDict[str, tuple[bytes, ShardKeys]] = OrderedDict()
        self._total = 0

    def candidate(self, path: str) -> tuple[bytes, int] | None:
        """(blob id, size) of the bytes the summary of ``path`` describes, if any."""
        item = self._items.get(path)
        return None if item is None else (item[0], item[1].size)

    def take(self, path: str) -> ShardKeys | None:
        """The summary of ``path``, once the caller checked it still applies."""
        item = self._items.get(path)
        if item is None:
            return None
        self._items.move_to_end(path)
        return item[1]

    def drop(self, path: str) -> None:
        """Forget the summary of ``path`` (it no longer describes the file)."""
        self._drop(path)

    def store(self, path: str, oid: pygit2.Oid, keys: ShardKeys) -> None:
        self._drop(path)
        if not keys.clean:
            return
        self._items[path] = (oid.raw, keys)
        self._total += len(keys)
        while self._total > self.max_keys and self._items:
            self._drop(next(iter(self._items)))

    def _drop(self, path: str) -> None:
        item = self._items.pop(path, None)
        if item is not None:
            self._total -= len(item[1])
