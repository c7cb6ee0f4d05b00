"""The git side of ``thrum doctor``: the sync worktree, the remote and its login, sizes.

Each check returns one `Check`: a status, one line saying what was found, and one
saying what to do when something needs action. ``warn`` and ``fail`` need action
(``thrum doctor`` then exits 1); ``info`` is worth knowing; ``skip`` could not run.
No trio here: the daemon calls these in worker threads, and ``thrum doctor`` calls
them itself when the daemon is stopped (`offline_checks`).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from thrum import nofollow
from thrum.paths import ThrumPaths
from thrum.events.layout import is_log_path

from . import AuthError, SyncError
from .gitstore.libgit2 import LibGit2Store
from .transport.credentials import Credentials, credentials_from_env
from .transport.failures import HostKeyRefused
from .worktree import SYNC_BRANCH, SYNC_REF, common_dir, sync_worktree_path

__all__ = ["Check", "maintenance_check", "offline_checks", "remote_check", "size_check", "worktree_check"]

NEEDS_ACTION = ("warn", "fail")


@dataclass
class Check:
    check: str
    status: str  # ok, info, warn, fail, skip
    detail: str
    action: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


def worktree_check(main_repo: os.PathLike[str] | str) -> Check:
    """The ``a-sync`` branch exists and its worktree has it checked out."""
    repair = "run `thrum init` again: it re-creates the branch and worktree and keeps every event"
    try:
        store = LibGit2Store(common_dir(main_repo))
        path = sync_worktree_path(main_repo)
    except SyncError as exc:
        return Check("worktree", "fail", f"cannot open the repository: {exc}", repair)
    tip = store.ref(SYNC_REF)
    if tip is None:
        return Check("worktree", "fail", f"branch {SYNC_BRANCH} is missing", repair)
    try:
        wt = LibGit2Store(path)
        head = wt.symbolic_target("HEAD") or str(wt.ref("HEAD"))
        workdir = (wt.workdir or Path()).resolve()
    except (SyncError, OSError) as exc:
        return Check("worktree", "fail", f"{path} is not a working sync worktree ({exc})", repair)
    if head != SYNC_REF or workdir != path.resolve():
        return Check("worktree", "fail", f"{path} has {head} checked out instead of {SYNC_BRANCH}", repair)
    return Check("worktree", "ok", f"{path} has branch {SYNC_BRANCH} checked out (tip {str(tip)[:10]})")


def remote_check(
    main_repo: os.PathLike[str] | str, remote_name: str, credentials: Credentials | None, local_only: bool = False
) -> Check:
    """The remote answers, which login it took, and where its ``a-sync`` is."""
    if local_only:
        return Check("remote", "info", "local-only mode: the log is committed but never fetched or pushed")
    try:
        store = LibGit2Store(common_dir(main_repo))
    except SyncError as exc:
        return Check("remote", "fail", f"cannot open the repository: {exc}")
    if remote_name not in store.remote_names():
        return Check(
            "remote",
            "warn",
            f"no remote named {remote_name}: messages stay on this machine",
            f"add one with `git remote add {remote_name} URL` (the one `git push` uses)",
        )
    try:
        ep = store.endpoint(remote_name, home=credentials.home() if credentials else None)
        where = f"{remote_name} ({ep.display})"
        creds = credentials if credentials is not None else credentials_from_env()
        tip = store.remote_heads(remote_name, creds).get(SYNC_REF)
        login = "none needed (a path on this machine)" if ep.kind == "local" else creds.last_source or "none needed"
    except HostKeyRefused as exc:
        return Check("remote", "fail", str(exc), "verify the server's host key as the message says")
    except AuthError as exc:
        return Check(
            "remote",
            "fail",
            str(exc),
            "fix the login so that `git push` works (git's credential helper, ssh-agent, "
            "~/.ssh/config), or set THRUM_GIT_TOKEN / THRUM_SSH_KEY",
        )
    except SyncError as exc:
        return Check("remote", "fail", str(exc), "check the URL (`git remote -v`) and the network")
    branch = f"{SYNC_BRANCH} at {str(tip)[:10]}" if tip else f"no {SYNC_BRANCH} yet (the first sync creates it)"
    return Check("remote", "ok", f"{where} answers over {ep.kind}; login: {login}; {branch}")


def _tree_size(path: Path) -> tuple[int, int]:
    """Bytes and files below ``path`` (an iterative walk: no link followed, no recursion)."""
    total = files = 0
    for rel in nofollow.regular_files(path, lambda rel: True):
        try:
            total += os.lstat(path / rel).st_size
            files += 1
        except OSError:
            pass
    return total, files


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def size_check(main_repo: os.PathLike[str] | str) -> Check:
    """How big the message log and the repository's object store are."""
    try:
        path = sync_worktree_path(main_repo)
        objects, _ = _tree_size(path.parents[1] / "objects")
    except (SyncError, IndexError):
        return Check("size", "skip", "the repository could not be measured")
    shards = nofollow.regular_files(path, is_log_path)
    log_bytes = sum(os.lstat(path / rel).st_size for rel in shards)
    return Check(
        "size",
        "info",
        f"message log {_mb(log_bytes)} in {len(shards)} shard(s); "
        f"git objects {_mb(objects)} (shared with the repository)",
    )


def maintenance_check(main_repo: os.PathLike[str] | str | None = None) -> Check:
    """Whether git keeps the object stores compact here (`maintenance`), and whether the
    last repack of a store failed (`repackfailures`: ``main_repo``'s notes)."""
    from . import maintenance, repackfailures

    why = maintenance.unavailable()
    failures = repackfailures.noted(common_dir(main_repo) / "thrum-sync") if main_repo is not None else {}
    if why is None and failures:
        where, failure = sorted(failures.items(), key=lambda kv: kv[1]["at"])[-1]
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(failure["at"]))
        more = f" (and {len(failures) - 1} more store(s))" if len(failures) > 1 else ""
        return Check(
            "maintenance",
            "warn",
            f"the last repack of {where} failed at {at}: {failure['why']}{more}; until one works, each sync "
            f"adds a pack of whole objects",
            "see .thrum/var/daemon.log for git's message; fix what it names (disk space, permissions, a damaged "
            "pack: `git fsck`); the next sync tries again and clears this",
        )
    if why is None:
        version = maintenance.git_version()
        return Check(
            "maintenance",
            "ok",
            f"object stores are consolidated by git repack: geometric roll-ups, a full repack each time "
            f"a store doubled (git {version[0]}.{version[1]})"
            if version
            else "object stores are consolidated by git",
        )
    need = f"{maintenance.MIN_GIT[0]}.{maintenance.MIN_GIT[1]}"
    return Check(
        "maintenance",
        "warn",
        f"{why}: object stores are not consolidated, and grow by a pack of whole objects per sync",
        f"install git {need} or newer (thrum runs `git repack --geometric=2` after its syncs)",
    )


def offline_checks(paths: ThrumPaths, environ: dict[str, str] | None = None) -> list[Check]:
    """The checks ``thrum doctor`` can make without the daemon (git side only)."""
    from .. import config as config_mod

    cfg = config_mod.load(paths.config)
    creds = credentials_from_env(cfg.values, environ=environ)
    return [
        worktree_check(paths.main_repo),
        remote_check(paths.main_repo, cfg.remote, creds, cfg.local_only),
        size_check(paths.main_repo),
        maintenance_check(paths.main_repo),
    ]
