"""The team root file as committed on the project's normal branch (the git half of `trust.teamroot`).

Rules (docs/design/trust.md, "The team root"):

1. Only a committed version counts, and only on the project's *normal* branch: the
   branch the remote's ``HEAD`` names (``refs/remotes/<remote>/HEAD``), else ``main``,
   else ``master``, else the branch checked out when it is the repository's only one.
   A version on a side branch (checked out or not) or an uncommitted edit does not
   count until it is merged: the forge's review and branch protection guard that branch.
2. The local branch is read (what this user pulled and reviewed); a clone without a
   local branch of that name reads the remote-tracking one.
3. The file is untrusted: it must be a regular blob at the top of the tree (not a link,
   not a submodule), and at most `teamroot.MAX_BYTES` are read. Parsing is the pure
   `teamroot.parse_team_root`.
4. Reading is cheap (a ref, a tree entry, one blob) so callers may read it at every
   sync; `CommittedRoot.blob` tells them whether it changed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from thrum.trust.teamroot import FILE_NAME, MAX_BYTES, TeamRoot, TeamRootError, parse_team_root

from . import SyncError
from .gitstore.api import FileMode, Kind, Oid, object_id, parse_tree
from .gitstore.libgit2 import LibGit2Store
from .worktree import common_dir

__all__ = ["CommittedRoot", "normal_branch", "read_committed_root", "team_summary", "worktree_copy_differs"]


@dataclass(frozen=True)
class CommittedRoot:
    """Where a replica's view of the root comes from, and what it says.

    ``root`` is None when the branch has no such file (trust on first use), or when
    ``error`` says why the file there cannot be used.
    """

    branch: str | None  # the normal branch's name, None when none could be found
    ref: str | None  # the ref read (refs/heads/main, or refs/remotes/origin/main)
    commit: str | None
    blob: str | None
    root: TeamRoot | None
    error: str | None = None

    @property
    def source(self) -> str:
        if self.ref is None:
            return "no normal branch found (no main, master or remote HEAD)"
        where = f"{FILE_NAME} on {self.ref} at {self.commit[:12] if self.commit else '?'}"
        return where if self.blob is not None else f"no {FILE_NAME} on {self.ref}"

    @property
    def trust(self) -> str:
        """``team-root`` when a usable root governs this replica, else ``tofu`` (trust on first use)."""
        return "team-root" if self.root is not None else "tofu"

    def summary(self) -> dict[str, Any]:
        """What ``sync status`` shows: the trust mode, where it comes from, and any error."""
        out: dict[str, Any] = {"trust": self.trust, "source": self.source, "error": self.error}
        if self.root is not None:
            out.update(log_id=self.root.log_id, policy=self.root.policy, admins=sorted(self.root.admins))
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "trust": self.trust,
            "branch": self.branch,
            "ref": self.ref,
            "commit": self.commit,
            "blob": self.blob,
            "source": self.source,
            "error": self.error,
            "root": self.root.to_json() if self.root is not None else None,
        }


def normal_branch(repo: LibGit2Store, remote: str = "origin") -> str | None:
    """The project's normal branch (rule 1), or None."""
    target = repo.symbolic_target(f"refs/remotes/{remote}/HEAD")
    if target is not None:
        prefix = f"refs/remotes/{remote}/"
        if target.startswith(prefix) and target != f"{prefix}HEAD":
            return target[len(prefix) :]
    for name in ("main", "master"):
        if repo.ref(f"refs/heads/{name}") is not None:
            return name
        if repo.ref(f"refs/remotes/{remote}/{name}") is not None:
            return name
    branches = [b for b in repo.local_branches() if b != "a-sync"]
    if len(branches) == 1:
        return branches[0]
    return None


def read_committed_root(repo_path: os.PathLike[str] | str, remote: str = "origin") -> CommittedRoot:
    """The root as committed on the normal branch of the repository holding ``repo_path``.

    Never raises for the file's content (the error is in the result); raises
    `NotAGitRepository` for a path outside git.
    """
    repo = LibGit2Store(common_dir(repo_path))
    branch = normal_branch(repo, remote)
    if branch is None:
        return CommittedRoot(None, None, None, None, None)
    ref = f"refs/heads/{branch}"
    found = repo.ref(ref)
    if found is None:
        ref = f"refs/remotes/{remote}/{branch}"
        found = repo.ref(ref)
    if found is None:
        return CommittedRoot(branch, None, None, None, None)
    try:
        commit = repo.commit(found)
        entries = parse_tree(repo.read(commit.tree)[1])
    except (ValueError, KeyError):
        return CommittedRoot(branch, ref, None, None, None, f"{ref} does not point to a commit")
    cid = str(commit.id)
    entry = entries.get(FILE_NAME.encode())
    if entry is None:
        return CommittedRoot(branch, ref, cid, None, None)
    mode, raw = entry
    blob_id = raw.hex()
    if mode not in (FileMode.BLOB, FileMode.BLOB_EXECUTABLE):
        return CommittedRoot(branch, ref, cid, blob_id, None, f"{FILE_NAME} on {ref} is not a regular file")
    header = repo.header(Oid(raw))
    if header is None or header[0] != Kind.BLOB:
        return CommittedRoot(branch, ref, cid, blob_id, None, f"{FILE_NAME} on {ref} is not a file")
    if header[1] > MAX_BYTES:
        return CommittedRoot(
            branch, ref, cid, blob_id, None, f"{FILE_NAME} on {ref} is {header[1]} bytes; at most {MAX_BYTES} are read"
        )
    try:
        root = parse_team_root(repo.read(Oid(raw))[1])
    except TeamRootError as exc:
        return CommittedRoot(branch, ref, cid, blob_id, None, f"{exc.message} (on {ref})")
    return CommittedRoot(branch, ref, cid, blob_id, root)


def team_summary(repo_path: os.PathLike[str] | str, remote: str = "origin") -> dict[str, Any]:
    """The trust mode for ``sync status``: a team root committed on the normal branch, or
    trust on first use. Never fails: an unreadable repository reads as no root, with why."""
    try:
        return read_committed_root(repo_path, remote).summary()
    except (SyncError, OSError) as exc:
        return {"trust": "tofu", "source": None, "error": f"cannot read the team root: {exc}"}


def worktree_copy_differs(checkout: os.PathLike[str] | str, committed: CommittedRoot) -> bool | None:
    """Whether the file in the user's checkout differs from the committed one (None: no file there).

    Read without following a link, bounded; only ``thrum team show`` asks (an edit there
    does not count until it is committed on the normal branch and merged).
    """
    path = os.path.join(os.fspath(checkout), FILE_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError:
        return True
    try:
        data = os.read(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if committed.blob is None:
        return True
    return str(object_id(Kind.BLOB, data)) != committed.blob
