"""The ``a-sync`` branch and its linked worktree, managed through the git store (libgit2).

Rules:

1. The worktree lives at ``<git common dir>/thrum-sync/a-sync`` so the main checkout
   and every linked worktree of the user's repository share one event log.
2. The user's HEAD, index and work tree are never touched: the branch is created
   with a ref write, and the worktree has its own HEAD and index.
3. A clone whose remote already has ``a-sync`` attaches to it; otherwise the branch
   starts from a fixed root commit (empty tree, fixed author, time and message), so
   replicas that start offline still share their root.
4. Nothing is lost when the worktree directory is broken (metadata deleted, the
   repository moved, the directory removed): its log files are merged back into
   the re-created worktree.
5. libgit2 never checks the branch out: it is untrusted content. Only the log
   files of its tree are written into a new worktree, by thrum, through `thrum.nofollow`.
6. A checkout interrupted half-way (``thrum init`` stopped on a large history, a crash)
   is done again by the next call: a file beside the worktree (`_checkout_pending`) says
   its files are being written until its index is, so a registered worktree holding part
   of the log is never taken for a healthy one.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

from thrum import durable, nofollow
from thrum.events.layout import is_log_path as ev_is_log_path  # not shards: no schema for `thrum init`

from . import NotAGitRepository, SyncError
from .gitstore.api import EMPTY_TREE, GitStore, Kind, Oid, Signature, commit_object, tree_object
from .gitstore.gitlib import discover
from .gitstore.libgit2 import LibGit2Store
from .merge.shard import merge_shard
from .checkout import write_log_files
from .transport.callbacks import SyncCallbacks
from .trees import LayoutTrees

log = logging.getLogger(__name__)

SYNC_BRANCH = "a-sync"
SYNC_REF = f"refs/heads/{SYNC_BRANCH}"


def tracking_ref(remote_name: str) -> str:
    """Where the remote's ``a-sync`` tip, as the last fetch or push saw it, is kept."""
    return f"refs/remotes/{remote_name}/{SYNC_BRANCH}"


Progress = Callable[[dict[str, Any]], None]  # `ensure_sync_worktree`'s reports

INIT_MESSAGE = "thrum: initialize a-sync\n"
# Fixed so that two replicas creating the branch offline make the same root commit.
INIT_SIGNATURE = Signature("thrum", "thrum@localhost", 1704067200, 0)

__all__ = [
    "SYNC_BRANCH",
    "SYNC_REF",
    "common_dir",
    "ensure_sync_worktree",
    "is_git_repo",
    "root_commit",
    "sync_worktree_path",
    "tracking_ref",
    "worktree_gitdir",
    "worktree_intact",
]


def is_git_repo(path: os.PathLike[str] | str) -> bool:
    """True when ``path`` is inside a git repository (work tree, linked worktree or git dir)."""
    return discover(path) is not None


def common_dir(repo_path: os.PathLike[str] | str) -> Path:
    """The git common dir (``.git`` of the main checkout) of the repository holding ``repo_path``.

    Works from a subdirectory and from a linked worktree of the user's repository.

    Raises:
        NotAGitRepository: ``repo_path`` is not inside a git repository.
    """
    gitdir = discover(repo_path)
    if gitdir is None:
        raise NotAGitRepository(f"not a git repository: {repo_path}")
    pointer = gitdir / "commondir"  # present in a linked worktree's git dir
    if pointer.is_file():
        target = Path(pointer.read_text().strip())
        gitdir = target if target.is_absolute() else gitdir / target
    return gitdir.resolve()


def sync_worktree_path(repo_path: os.PathLike[str] | str) -> Path:
    """Where the ``a-sync`` worktree of the repository holding ``repo_path`` lives."""
    return common_dir(repo_path) / "thrum-sync" / SYNC_BRANCH


def ensure_sync_worktree(
    repo_path: os.PathLike[str] | str,
    remote_name: str = "origin",
    callbacks: SyncCallbacks | None = None,
    progress: Progress | None = None,
) -> Path:
    """Make sure branch ``a-sync`` and its worktree exist; return the worktree path.

    Idempotent. A missing local branch is created from the remote's ``a-sync``
    when the remote has one (``callbacks`` authenticate that fetch), else from the
    fixed root commit. An unreachable remote is not an error here: the branch is
    created locally and the next sync reconciles it with the remote. ``progress``:
    told when the fetch starts (``{"phase": "fetch", "remote": ...}``) and how far the
    checkout of a new worktree is (``{"phase": "checkout", "files": ..., "done": ...,
    "elapsed": ...}``), for `thrum init`'s terminal line.

    Raises:
        NotAGitRepository: ``repo_path`` is not inside a git repository.
        SyncError: the worktree cannot be created.
    """
    cdir = common_dir(repo_path)
    store = LibGit2Store(cdir)
    if store.ref(SYNC_REF) is None:
        if progress is not None and remote_name in store.remote_names():
            progress({"phase": "fetch", "remote": remote_name})
        tip = _remote_sync_tip(store, remote_name, callbacks)
        if tip is not None:
            store.update_ref(SYNC_REF, tip, "thrum: attach to remote a-sync", expected=None)
            log.info("attached %s to %s/%s at %s", SYNC_REF, remote_name, SYNC_BRANCH, tip)
        else:
            root = root_commit(store)
            store.update_ref(SYNC_REF, root, "thrum: initialize a-sync", expected=None)
            log.info("created %s at root %s", SYNC_REF, root)
    path = cdir / "thrum-sync" / SYNC_BRANCH
    _ensure_linked_worktree(store, cdir, path, progress)
    return path


def root_commit(store: GitStore) -> Oid:
    """The fixed root commit: the empty tree, `INIT_SIGNATURE`, `INIT_MESSAGE` (rule 3)."""
    store.write(Kind.TREE, tree_object({}))
    return store.write(Kind.COMMIT, commit_object(EMPTY_TREE, [], INIT_SIGNATURE, INIT_MESSAGE))


def _remote_sync_tip(store: GitStore, remote_name: str, callbacks: SyncCallbacks | None) -> Oid | None:
    """Fetch the remote's a-sync; its tip, or None (no remote, no branch, unreachable)."""
    if remote_name not in store.remote_names():
        return None
    try:  # relative URLs, SSH settings, credentials, timeout (issue 12): the store's transport
        heads = store.fetch(
            remote_name, [f"+{SYNC_REF}:{tracking_ref(remote_name)}"], callbacks.creds if callbacks else None
        )
    except Exception as exc:  # noqa: BLE001 - any remote failure means "create locally"
        log.warning("cannot fetch %s (%s); creating it locally", SYNC_BRANCH, exc)
        return None
    tip = heads.get(SYNC_REF)
    if tip is not None and not _is_commit_with_tree(store, tip):
        log.warning("the remote's %s is not a commit with a tree (%s); creating it locally", SYNC_BRANCH, tip)
        return None
    return tip


def _is_commit_with_tree(store: GitStore, oid: Oid) -> bool:
    """A fetched tip is untrusted: only a commit whose tree is a tree is attached to."""
    header = store.header(oid)
    if header is None or header[0] != Kind.COMMIT:
        return False
    try:
        tree = store.commit(oid).tree
    except (KeyError, ValueError):
        return False
    found = store.header(tree)
    return found is not None and found[0] == Kind.TREE


def worktree_gitdir(path: Path) -> Path | None:
    """The git dir a worktree's ``.git`` file points to (resolved), or None (no such file)."""
    try:
        text = (path / ".git").read_text().strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text[len("gitdir:") :].strip())
    return (target if target.is_absolute() else path / target).resolve()


def worktree_intact(path: Path, gitdir: Path) -> bool:
    """Whether the worktree at ``path`` still works with its git dir ``gitdir``
    (``.git/worktrees/<name>``): its ``.git`` file points there, and ``HEAD`` and
    ``commondir`` are there (``rm -rf .git/worktrees/a-sync`` leaves the directory)."""
    if worktree_gitdir(path) != gitdir.resolve():  # also: the .git file is gone
        return False
    return (gitdir / "HEAD").is_file() and (gitdir / "commondir").is_file()


def _registered(store: LibGit2Store, cdir: Path) -> dict[str, tuple[Path, str]]:
    """name -> (worktree path, HEAD text) for every registered linked worktree."""
    out = {}
    for name in store.worktrees():
        meta = cdir / "worktrees" / name
        try:
            wt_path = Path((meta / "gitdir").read_text().strip()).parent
            head = (meta / "HEAD").read_text().strip()
        except OSError:
            wt_path, head = Path(), ""
        out[name] = (wt_path, head)
    return out


def _ensure_linked_worktree(store: LibGit2Store, cdir: Path, path: Path, progress: Progress | None = None) -> None:
    worktrees = _registered(store, cdir)
    for name, (wt_path, head) in worktrees.items():
        if _same(wt_path, path) and worktree_gitdir(path) == (cdir / "worktrees" / name).resolve():
            if head != f"ref: {SYNC_REF}":
                raise SyncError(
                    f"{path} has {head!r} checked out instead of {SYNC_BRANCH}; "
                    f"remove that worktree and run thrum again"
                )
            if _checkout_pending(path).exists():  # rule 6
                log.warning("the checkout of the log into %s was interrupted; writing its files again", path)
                _materialise(LibGit2Store(path), path, progress)
            return  # healthy
    # Stale registrations of our path or of our branch (directory gone, repository moved).
    stale = []
    for name, (wt_path, head) in worktrees.items():
        if _same(wt_path, path):
            stale.append(name)
        elif head == f"ref: {SYNC_REF}":
            alive = wt_path.is_dir() and worktree_gitdir(wt_path) == (cdir / "worktrees" / name).resolve()
            if alive:
                raise SyncError(
                    f"branch {SYNC_BRANCH} is checked out in another worktree at {wt_path}; "
                    f"remove it (git worktree remove) and run thrum again"
                )
            stale.append(name)
    salvage = None
    if path.exists() or path.is_symlink():
        salvage = _aside(path)  # uncommitted appends in there must survive
        log.warning("%s was not a valid worktree; moved it to %s to recover its events", path, salvage)
    for name in stale:
        _unregister(store, cdir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    taken = set(store.worktrees())
    name = next(n for n in _names() if n not in taken and not (cdir / "worktrees" / n).exists())
    _add_worktree_without_checkout(store, name, path, progress)
    if salvage is not None:
        _recover(salvage, path)


def _add_worktree_without_checkout(store: LibGit2Store, name: str, path: Path, progress: Progress | None) -> None:
    """Create the linked worktree on ``a-sync`` without letting libgit2 check anything out.

    The branch is untrusted (links, submodules, junk): libgit2 would materialise all
    of it. So the worktree is created on a temporary branch at the empty root
    commit (nothing to check out), its HEAD is pointed at ``a-sync``, and only the
    log files are written, by thrum, through `thrum.nofollow`.
    """
    pending = _checkout_pending(path)
    pending.touch()  # before the worktree is registered: until its index is written (rule 6)
    durable.fsync_dir(pending.parent)
    tmp_ref = f"refs/heads/thrum-attach-{os.getpid()}"
    store.update_ref(tmp_ref, root_commit(store), "thrum: attach the worktree")
    try:  # SyncError: libgit2 refused
        store.add_worktree(name, path, tmp_ref)
        wt = LibGit2Store(path)
        wt.set_symbolic_ref("HEAD", SYNC_REF, "thrum: the worktree has a-sync checked out")
    finally:
        store.delete_ref(tmp_ref)
    _materialise(wt, path, progress)


def _materialise(wt: LibGit2Store, path: Path, progress: Progress | None = None) -> None:
    """Write the log files of the worktree's HEAD tree (nothing else) and index them
    (`thrum.sync.checkout`: on two cores when they are many)."""
    trees = LayoutTrees(wt)
    head = wt.ref("HEAD")
    tree = wt.commit(head).tree if head is not None else EMPTY_TREE
    files = trees.log_files(tree)
    told = None
    if progress is not None and files:
        started = time.perf_counter()

        def told(done: int) -> None:
            report = {"phase": "checkout", "files": len(files), "done": done}
            progress({**report, "elapsed": round(time.perf_counter() - started, 3)})

    wt.rewrite_index(write_log_files(lambda oid: wt.read(oid)[1], path, files, progress=told))
    _checkout_pending(path).unlink(missing_ok=True)  # every file and the index written (rule 6)
    ignored = trees.ignored(tree)
    if ignored:
        log.warning(
            "the %s branch holds entries thrum ignores (never checked out): %s",
            SYNC_BRANCH,
            ", ".join(f"{n} {reason}" for reason, n in sorted(ignored.items())),
        )


def _checkout_pending(path: Path) -> Path:
    """The file that says the log files of the worktree at ``path`` are being written (rule 6)."""
    return path.parent / f".{path.name}.checkout-pending"


def _unregister(store: LibGit2Store, cdir: Path, name: str) -> None:
    """Forget a stale worktree registration (what ``git worktree prune`` does)."""
    if not store.prune_worktree(name):
        # libgit2 refuses when the registration's own paths are stale (repository moved).
        _remove_quietly(cdir / "worktrees" / name)
    log.info("removed stale worktree registration %s", name)


def _names() -> Iterator[str]:
    yield SYNC_BRANCH
    yield f"thrum-{SYNC_BRANCH}"
    n = 2
    while True:
        yield f"thrum-{SYNC_BRANCH}-{n}"
        n += 1


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _aside(path: Path) -> Path:
    n = 0
    while True:
        target = path.with_name(f"{path.name}.broken-{os.getpid()}-{n}")
        if not target.exists():
            os.replace(path, target)
            return target
        n += 1


def _recover(salvage: Path, path: Path) -> None:
    """Merge the shard files of a broken worktree directory into the new worktree.

    Neither side is read or written through a link (`thrum.nofollow`).
    """
    for rel in nofollow.regular_files(salvage, is_log_path):  # iterative; links never followed
        try:
            found = nofollow.read_regular(salvage, rel)
            if found is None:
                continue
            current = nofollow.read_regular(path, rel)
            merged = merge_shard(current[0] if current else b"", found[0]).data
            if current is None or merged != current[0]:
                durable.write_atomic(path, rel, merged)
        except OSError as exc:
            log.warning("could not recover %s from %s: %s", rel, salvage, exc)
    _remove_quietly(salvage)


def _remove_quietly(path: Path) -> None:
    """Delete a directory of ours, whatever its depth (`nofollow.remove_tree`: iterative)."""
    try:
        nofollow.remove_tree(path)
    except OSError as exc:
        log.warning("could not remove %s: %s", path, exc)


def is_log_path(rel: str) -> bool:
    """A file path of the log's layout (``thrum.events.is_log_path``): the only files thrum keeps."""
    return ev_is_log_path(rel)
