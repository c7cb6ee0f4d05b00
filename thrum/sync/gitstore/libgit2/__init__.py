"""`api.GitStore` over pygit2: one repository handle (`LibGit2Store`).

Rules:

1. One store wraps one ``pygit2.Repository``; pygit2's handles are not shared between
   threads, so a store is used by one thread at a time (its owner's lock), except the
   remote look-ups the interface calls thread-safe (`remote_names`, `remote_url`), which
   open a handle of their own each time.
2. Objects are read from the object database directly (``odb.read``: half the cost of
   ``repo[oid].data`` on packed blobs); a sync step's new objects go into one pack
   (`objbatch.ObjectBatch`).
3. A ref moves by compare-and-swap under libgit2's ref lock (a ref transaction: the
   ``.lock`` file git and libgit2 both honour), so a writer in another process is
   never overwritten unseen.
4. Reaching a remote goes through `thrum.sync.transport.session` (endpoint, logins,
   a path remote looked at first, the timeout, one-line errors). libgit2's local
   transport checks that a push is a fast-forward of the tip it saw and then moves the
   ref without comparing again, so a push to a path remote is confirmed by reading the
   ref back (`_landed`): a push that did not land is a lost race.
5. Packs a repack deleted are let go at the start of each step (`refresh`,
   `gitlib.PackWatch`).
6. The commits read last are kept by id (`COMMITS_KEPT`; an id never changes content): a
   cycle reads the head five to seven times, and libgit2 caches no commit over 4 KiB
   (the first commit of a large history lists thousands of paths).
7. A fetch runs between views of both repositories holding only the refs its refspecs
   name (`fetchview`): neither side's other branches nor tags are transferred, walked
   or offered.

The ``config`` file beside this module holds libgit2's process-wide pack-building
defaults (`gitlib.tune_pack_building`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pygit2
from pygit2.enums import FileStatus, ReferenceType, SortMode

from ... import SyncError
from ...transport.credentials import Credentials
from ...transport.endpoint import Endpoint, endpoint, resolved_url
from ...transport.failures import translate
from ...transport.session import Session, configured_url, list_remote_heads, lost_race, session
from ...transport.urls import main_worktree_dir, redact_url
from ..api import ANY, Commit, Oid, PushOutcome, AnyTarget
from ..gitlib import (
    PackWatch,
    add_index_entry,
    cache_log_trees,
    discover,
    fetch_refs,
    objects_dir,
    open_repo,
    tune_pack_building,
    update_index,
)
from ..fetchview import FetchViews, parse_refspecs
from ..objbatch import ObjectBatch

log = logging.getLogger(__name__)

__all__ = ["LibGit2Store"]

_WT_CHANGED = FileStatus.WT_NEW | FileStatus.WT_MODIFIED | FileStatus.WT_TYPECHANGE


COMMITS_KEPT = 64


def _py(oid: Oid) -> pygit2.Oid:
    return pygit2.Oid(raw=oid.raw)


def _ours(oid: pygit2.Oid) -> Oid:
    return Oid(oid.raw)


class _Stale(Exception):
    """A compare-and-swap found another value: the transaction is abandoned."""


def _file_key(path: str) -> tuple[int, int, int] | None:
    """What tells one version of a file from the next without reading it (None: no such file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _user_config_files() -> tuple[str, ...]:
    """The user's and the system's git config files (where libgit2 looks for them)."""
    home = os.environ.get("HOME", "")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return (os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config"), "/etc/gitconfig")


class LibGit2Store:
    """The repository at exactly ``path`` (a work tree, a linked worktree or a git dir).

    Raises:
        SyncError: there is no repository at ``path``.
    """

    def __init__(self, path: os.PathLike[str] | str) -> None:
        tune_pack_building()  # before the handle reads its config
        cache_log_trees()
        try:
            self.repo = open_repo(path)
        except pygit2.GitError as exc:
            raise SyncError(f"{path} is not a git repository: {exc}") from exc
        self.objects = objects_dir(self.repo)
        self._remotes_seen: tuple[tuple[int, int, int] | None, list[str]] = (None, [])  # remote_names' answer
        self._urls_seen: tuple[tuple[object, ...] | None, dict[tuple[str, bool], str | None]] = (None, {})
        self.common_dir = self.objects.parent  # its config names the remotes
        self._config_file = str(self.common_dir / "config")  # remote_names looks at it on every send
        self.base_dir = main_worktree_dir(self.common_dir)  # where a relative remote path starts
        self._packs = PackWatch(self.repo, self.objects)
        self._commits: dict[bytes, Commit] = {}  # id -> its tree and parents (rule 6)
        self._views: dict[str, FetchViews] = {}  # remote name -> the views its fetches go between (rule 7)

    @classmethod
    def discovered(cls, path: os.PathLike[str] | str) -> LibGit2Store:
        """The repository holding ``path`` (searching upwards, as git does).

        Raises:
            SyncError: ``path`` is not in a git repository.
        """
        found = discover(path)
        if found is None:
            raise SyncError(f"{path} is not in a git repository")
        return cls(found)

    def add_alternate(self, objects: Path) -> None:
        """Read objects from ``objects`` too (a pre-receive hook's quarantine)."""
        self.repo.odb.add_disk_alternate(str(objects))

    def resolve(self, spec: str) -> Commit:
        """The commit ``spec`` names (a ref, an id, ``a-sync~2``: git's revision syntax).

        Raises:
            KeyError: nothing by that name. ValueError: it names something else than a commit.
        """
        try:
            found = self.repo.revparse_single(spec).peel(pygit2.Commit)
        except pygit2.GitError as exc:
            raise KeyError(spec) from exc
        return self.commit(_ours(found.id))

    def local_branches(self) -> list[str]:
        """The names of the local branches (``main``, not ``refs/heads/main``)."""
        return list(self.repo.branches.local)

    @property
    def git_dir(self) -> Path:
        """This handle's git dir (a linked worktree's own: ``.git/worktrees/<name>``)."""
        return Path(self.repo.path)

    @property
    def workdir(self) -> Path | None:
        return Path(self.repo.workdir) if self.repo.workdir else None

    # -- objects

    def header(self, oid: Oid) -> tuple[int, int] | None:
        try:
            kind, size = self.repo.odb.read_header(_py(oid))
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return int(kind), size

    def read(self, oid: Oid) -> tuple[int, bytes]:
        try:
            kind, data = self.repo.odb.read(_py(oid))
        except (ValueError, pygit2.GitError):
            raise KeyError(oid) from None
        return int(kind), data

    def write(self, kind: int, data: bytes, /) -> Oid:
        return _ours(self.repo.odb.write(kind, data))

    def batch(self) -> ObjectBatch:
        return ObjectBatch(self.objects)

    # -- history

    def commit(self, oid: Oid) -> Commit:
        known = self._commits.get(oid.raw)
        if known is not None:
            return known
        found = self.repo.get(_py(oid))
        if found is None:
            raise KeyError(oid)
        if not isinstance(found, pygit2.Commit):
            raise ValueError(f"object {oid} is not a commit")
        commit = Commit(oid, _ours(found.tree_id), tuple(_ours(p) for p in found.parent_ids))
        if len(self._commits) >= COMMITS_KEPT:
            self._commits.pop(next(iter(self._commits)))
        self._commits[oid.raw] = commit
        return commit

    def is_ancestor(self, ancestor: Oid, descendant: Oid) -> bool:
        if ancestor == descendant:
            return False
        try:
            return bool(self.repo.descendant_of(_py(descendant), _py(ancestor)))
        except (KeyError, ValueError, pygit2.GitError):
            return False

    def ancestors(self, tip: Oid) -> Iterator[Commit]:
        for c in self.repo.walk(_py(tip), SortMode.TOPOLOGICAL):
            yield Commit(_ours(c.id), _ours(c.tree_id), tuple(_ours(p) for p in c.parent_ids))

    # -- refs

    def ref(self, name: str) -> Oid | None:
        found = self.repo.references.get(name)
        if found is None:
            return None
        try:
            target = found.resolve().target
        except (KeyError, pygit2.GitError):
            return None  # a symbolic ref to a branch not born yet
        return _ours(target) if isinstance(target, pygit2.Oid) else None

    def symbolic_target(self, name: str) -> str | None:
        found = self.repo.references.get(name)
        if found is None or found.type != ReferenceType.SYMBOLIC:
            return None
        target = found.target
        return target if isinstance(target, str) else None

    def _direct(self, name: str) -> Oid | None:
        found = self.repo.references.get(name)
        if found is None or found.type != ReferenceType.DIRECT:
            return None
        target = found.target
        return _ours(target) if isinstance(target, pygit2.Oid) else None

    def update_ref(self, name: str, new: Oid, message: str, *, expected: Oid | None | AnyTarget = ANY) -> bool:
        if isinstance(expected, AnyTarget):
            self.repo.create_reference_direct(name, _py(new), True, message=message)
            return True
        try:
            with self.repo.transaction() as tx:
                tx.lock_ref(name)  # git's and libgit2's writers wait for (or fail on) this lock
                if self._direct(name) != expected:
                    raise _Stale
                tx.set_target(name, _py(new), message=message)
        except _Stale:
            return False
        except pygit2.GitError as exc:  # the lock is held: someone else is moving it now
            log.info("could not lock %s: %s", name, exc)
            return False
        return True

    def set_symbolic_ref(self, name: str, target: str, message: str) -> None:
        self.repo.create_reference_symbolic(name, target, True, message=message)

    def delete_ref(self, name: str) -> None:
        try:
            self.repo.references.delete(name)
        except (KeyError, pygit2.GitError):
            pass

    # -- the worktree

    def changed_files(self) -> list[str]:
        if self.repo.workdir is None:
            return []
        status = self.repo.status(untracked_files="all")
        return sorted(p for p, flags in status.items() if flags & _WT_CHANGED)

    def record_stats(self, files: dict[str, tuple[Oid, os.stat_result]]) -> None:
        update_index(self.repo, files)

    def refresh(self) -> bool:
        return self._packs.check()

    @property
    def pack_releases(self) -> int:
        """How many times `refresh` let go of packs a repack deleted."""
        return self._packs.releases

    def rewrite_index(self, files: dict[str, tuple[Oid, os.stat_result]]) -> None:
        """Make the index hold exactly ``files`` (a worktree just materialised), written once."""
        index = self.repo.index
        index.clear()
        for path, (oid, st) in files.items():
            add_index_entry(index, path, oid, st)
        index.write()

    # -- linked worktrees (`thrum.sync.worktree` manages the a-sync one)

    def worktrees(self) -> list[str]:
        """The names of the repository's linked worktrees."""
        return list(self.repo.list_worktrees())

    def add_worktree(self, name: str, path: Path, branch_ref: str) -> None:
        """Register and create the linked worktree ``name`` at ``path`` on ``branch_ref``
        (libgit2 checks that branch out: give it one with nothing to check out).

        Raises:
            SyncError: libgit2 refused.
        """
        try:
            self.repo.add_worktree(name, str(path), self.repo.references[branch_ref])
        except (KeyError, pygit2.GitError) as exc:
            raise SyncError(f"cannot create the sync worktree at {path}: {exc}") from exc

    def prune_worktree(self, name: str) -> bool:
        """Forget the registration ``name`` (its working directory is never deleted); False
        when libgit2 refuses (its own paths are stale: the repository moved)."""
        try:
            # pygit2's prune(True) passes only PRUNE_VALID: it never deletes a working directory.
            self.repo.lookup_worktree(name).prune(True)
        except pygit2.GitError:
            return False
        return True

    # -- remotes

    def remote_names(self) -> list[str]:
        """Kept until the repository's config file changes (``git remote add``, ``thrum remote``
        and ``git config`` all rewrite it): addressing asks on every send (``has_remote``), and
        opening the repository to list its remotes cost ~0.3 ms of the event loop each time, a
        fifth of a durable send's CPU."""
        key = _file_key(self._config_file)
        if key is None or key != self._remotes_seen[0]:
            names = [name for name in open_repo(self.common_dir).remotes.names() if name is not None]
            self._remotes_seen = (key, names)
        return list(self._remotes_seen[1])

    def remote_url(self, name: str, *, push: bool = False) -> str | None:
        """Kept, like `remote_names`, until a config file changes (the repository's, or the
        user's and the system's, whose ``url.*.insteadOf`` rewrite it): a cycle asks five or
        six times (the fetch, the push, their messages, the tidy-up), and each answer opened
        the repository again."""
        key = (_file_key(self._config_file), *(_file_key(f) for f in _user_config_files()))
        seen_key, urls = self._urls_seen
        if key[0] is None or key != seen_key:
            urls = {}
            self._urls_seen = (key, urls)
        if (name, push) not in urls:
            urls[(name, push)] = configured_url(open_repo(self.common_dir), name, push=push)
        return urls[(name, push)]

    def endpoint(self, remote: str, home: str | None = None) -> Endpoint:
        """Where ``remote`` really is (`thrum.sync.transport.endpoint`), for ``thrum doctor``."""
        return endpoint(remote, self.remote_url(remote), self.base_dir, home=home)

    def _shown(self, remote: str, push: bool = False) -> str:
        return redact_url(resolved_url(self.remote_url(remote, push=push) or "", self.base_dir)) or ""

    def _known(self, remote: str) -> None:
        if remote not in self.repo.remotes.names():
            raise SyncError(f"no remote named {remote} is configured")

    def fetch(self, remote: str, refspecs: list[str], credentials: Credentials | None) -> dict[str, Oid]:
        """Through the fetch views (rule 7): the remote's other refs, our other refs and
        tags play no part; the destinations are then set here from what was fetched."""
        self._known(remote)
        try:
            specs = parse_refspecs(refspecs)
        except ValueError as exc:
            raise SyncError(str(exc)) from None
        views = self._views.get(remote)
        if views is None:
            views = self._views[remote] = FetchViews(self.common_dir, remote)
        try:
            with (
                views.held(),
                views.local_view(self.repo, specs) as local,
                session(local, remote, self.base_dir, credentials) as net,
            ):
                source = net.remote
                if net.path_remote is not None:
                    source = local.remotes.create_anonymous(views.remote_view(net.path_remote.git_dir, specs))
                fetch_refs(source, refspecs, net.callbacks)
                heads = {h.name: h.oid for h in source.list_heads(connect=False) if h.name is not None}
        except SyncError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise translate(exc, remote, self._shown(remote)) from exc
        fetched = {spec.src: _ours(heads[spec.src]) for spec in specs if spec.src in heads}
        for spec in specs:
            tip = fetched.get(spec.src)
            if tip is not None and self.ref(spec.dst) != tip:
                self.repo.references.create(spec.dst, _py(tip), force=True)
        return fetched

    def remote_heads(self, remote: str, credentials: Credentials | None) -> dict[str, Oid]:
        self._known(remote)
        try:
            heads = list_remote_heads(self.repo, remote, self.base_dir, credentials)
        except SyncError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated at this boundary
            raise translate(exc, remote, self._shown(remote)) from exc
        return {name: _ours(oid) for name, oid in heads.items()}

    def push(self, remote: str, ref: str, credentials: Credentials | None, expected: Oid | None = None) -> PushOutcome:
        self._known(remote)
        head = self.ref(ref)
        shown = self._shown(remote, push=True)
        with session(self.repo, remote, self.base_dir, credentials, push=True) as net:
            callbacks = net.callbacks
            if expected is not None:  # stopped before anything is sent when the remote moved
                callbacks.expected[ref] = pygit2.Oid(raw=expected.raw)
            try:
                net.remote.push([f"{ref}:{ref}"], callbacks=callbacks, proxy=True)
            except Exception as exc:  # noqa: BLE001 - a lost race is not an error
                if not lost_race(str(exc)):
                    raise
                log.info("push of %s to %s lost a race: %s", ref, shown, exc)
                return PushOutcome(False)
            for _ref, message in callbacks.rejected:
                return PushOutcome(False, None if lost_race(message) else message)
            if net.endpoint.kind == "local" and head is not None and not self._landed(net, ref, head):
                log.info("push of %s to %s was overwritten by another pusher", ref, shown)
                return PushOutcome(False)
        return PushOutcome(True)

    def _landed(self, net: Session, ref: str, head: Oid) -> bool:
        """Whether a path remote's ``ref`` holds ``head`` after our push, or a descendant of it (rule 4)."""
        heads = {h.name: _ours(h.oid) for h in net.remote.list_heads(callbacks=net.callbacks) if h.name is not None}
        tip = heads.get(ref)
        if tip == head:
            return True
        return tip is not None and self.header(tip) is not None and self.is_ancestor(head, tip)
