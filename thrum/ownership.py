"""Whether the ``.thrum/`` in use is the user's own: never state that git put there or
that another user owns.

Rules (docs/design/trust.md, "Local state"):

1. Nothing under ``.thrum/`` may be tracked by git, in the index of the checkout that
   holds it nor (through ``.thrum/redirect``) of the linked worktree the command runs
   in. A branch that commits ``.thrum/identities/alice.{json,key}`` would otherwise
   make whoever checks it out use the committer's key as alice's ("local identities
   win"), and a tracked ``config.json`` would choose the remote the log goes to.
2. ``.thrum/`` and its ``identities/`` and ``var/`` are directories owned by the user
   (the two inside not links); ``config.json`` and ``redirect`` are regular files
   owned by the user. Another user's state is never used, whatever it says.
3. A private key file is used only when it is a regular file (never through a link)
   owned by the user, with mode 0600, and not tracked (`key_file_problem`; the
   daemon checks each key when it loads it: `thrum.trust.keys.LocalKeys`).

`state_problem` is on every command's start-up path (`thrum.paths.resolve`) and
the daemon's: a few ``stat`` calls and the first entries of git's index
(`thrum.gitindex`, read by hand: pygit2 alone would cost 40 ms).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import Forbidden

TYPE_CHECKING = False  # typing is not imported: it costs start-up time (mypy reads this as True)
if TYPE_CHECKING:
    from .paths import ThrumPaths

__all__ = ["UntrustedState", "key_file_problem", "require_own_state", "state_problem", "tracked"]

DOTTHRUM = ".thrum"
ME_WHAT = "thrum uses only state its own user made"


class UntrustedState(Forbidden):
    """The ``.thrum/`` state was not made by this user's thrum (one line: what and why)."""


def _owner_problem(path: Path, st: os.stat_result, what: str) -> str | None:
    me = os.geteuid()
    if st.st_uid != me:
        return f"{path} belongs to another user (uid {st.st_uid}; thrum runs as uid {me}): {what}"
    return None


def tracked(checkout: Path, rel: str) -> list[str]:
    """Paths git's index of ``checkout`` tracks at ``rel`` or below it (unreadable index: ``rel``)."""
    from .gitindex import Unreadable, tracked_under

    try:
        return tracked_under(checkout, rel)
    except Unreadable:
        return [rel]  # cannot tell: refuse rather than guess


def _tracked_problem(checkout: Path, thrum_dir: Path) -> str | None:
    found = tracked(checkout, DOTTHRUM)
    if not found:
        return None
    found.sort(key=lambda p: (not p.endswith(".key"), not p.endswith("config.json"), p))
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return (
        f"{found[0]} is tracked by git{more}, so a checkout put it in {thrum_dir}: thrum uses only state it "
        f"made itself; take .thrum/ out of that branch (`git rm -r --cached .thrum`) or check out another"
    )


def state_problem(paths: ThrumPaths) -> str | None:
    """The first reason not to use the state of ``paths`` (a `thrum.paths.ThrumPaths`), or None.

    A ``.thrum/`` that does not exist yet has no problem of its own, but a tracked
    one in the index still has: ``thrum init`` would make it where git writes.
    """
    thrum_dir: Path = paths.thrum_dir
    if paths.repo != paths.main_repo:  # a linked worktree: its own .thrum holds the redirect
        problem = _redirect_problem(paths.repo)
        if problem is not None:
            return problem
    try:
        st = os.stat(thrum_dir)
    except FileNotFoundError:
        return _tracked_problem(paths.main_repo, thrum_dir)
    except OSError as exc:
        return f"cannot read {thrum_dir}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{thrum_dir} is not a directory"
    problem = _owner_problem(thrum_dir, st, ME_WHAT)
    if problem:
        return problem
    for name, want_dir in (("identities", True), ("var", True), ("config.json", False)):
        problem = _entry_problem(thrum_dir / name, want_dir)
        if problem:
            return problem
    return _tracked_problem(paths.main_repo, thrum_dir)


def _redirect_problem(repo: Path) -> str | None:
    """What is wrong with a linked worktree's ``.thrum/redirect`` (none there is fine)."""
    local = repo / DOTTHRUM
    redirect = local / "redirect"
    try:
        st = os.lstat(redirect)
    except OSError:
        return None
    problem = _owner_problem(redirect, st, ME_WHAT)
    if problem is None and not stat.S_ISREG(st.st_mode):
        problem = f"{redirect} is not a regular file"
    if problem is None:
        problem = _tracked_problem(repo, local)
    return problem


def _entry_problem(path: Path, want_dir: bool) -> str | None:
    """What is wrong with one entry of ``.thrum/`` (a missing one is fine)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    problem = _owner_problem(path, st, ME_WHAT)
    if problem:
        return problem
    if want_dir and not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory (a link or a file put there): {ME_WHAT}"
    if not want_dir and not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file (a link put there?): {ME_WHAT}"
    return None


def require_own_state(paths: ThrumPaths) -> None:
    """Raises:
    UntrustedState: `state_problem` found one (the message is that one line).
    """
    problem = state_problem(paths)
    if problem is not None:
        raise UntrustedState(f"refusing to use this thrum set-up: {problem}")


def key_file_problem(path: Path, st: os.stat_result) -> str | None:
    """Why the private key file at ``path`` (``st``: its ``fstat``, opened without
    following links) may not be used, or None. The tracked check reads git's index of
    the checkout holding ``.thrum/`` (``path`` is ``<checkout>/.thrum/identities/<name>.key``)."""
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    problem = _owner_problem(path, st, "a private key is used only when it is the user's own")
    if problem:
        return problem
    checkout = path.parent.parent.parent
    rel = f"{DOTTHRUM}/{path.parent.name}/{path.name}"
    if tracked(checkout, rel):
        return f"{rel} is tracked by git, so a checkout put it in {checkout / DOTTHRUM}: a tracked key is never used"
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o600:
        return f"{path} has mode {mode:04o}: a private key is used only with mode 0600 (chmod 600 {path})"
    return None
