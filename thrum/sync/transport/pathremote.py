"""A remote that is a repository on this machine, looked at before libgit2 touches it.

Whoever can write a path remote's directory (a team's repository on a shared
filesystem) can plant files that libgit2 follows on its own: ``commondir`` (it then
reads and writes another repository's refs), ``objects/info/alternates`` (it reads
another repository's objects, and a push carries them into the shared remote),
symbolic links among the refs (a push writes the new tip wherever the link points:
any file the user can write, the user's own ``main`` included), a linked
``objects/pack`` (a push writes its pack elsewhere), and FIFOs or devices where a
file is read (a sync that waits forever). So, before every fetch, push or listing,
the remote is treated as git treats a repository it does not own (``safe.directory``):

1. Its git directory must belong to the user, unless the user trusts it: its path
   (or ``*``) in ``"trusted_remote_paths"`` of ``.thrum/config.json``. libgit2 refuses
   another user's repository by itself; a trusted one is opened with that check off,
   for that one operation.
2. No ``commondir``, no ``objects/info/alternates`` or ``http-alternates``, no
   ``.git`` file pointing elsewhere: refused, never followed.
3. ``HEAD``, ``config``, ``packed-refs`` and the ``a-sync`` ref are regular files
   where present; ``refs``, ``refs/heads``, ``objects``, ``objects/pack``,
   ``objects/info`` and the loose objects' fan-out directories are real directories;
   every entry of ``objects/pack`` and of the fan-out directories is a regular file.
   A link, a FIFO, a device or a socket anywhere there is refused. A fan-out directory
   found clean is not listed again while its change time (ctime: set by the kernel at
   every entry added, removed or renamed, and by chmod or utime; no user can set it
   back) is the one it had then, and is older than `SETTLED_S` at the look (a directory
   changed within the same tick of a coarse clock would show the same ctime twice):
   a shared remote pushed to by git holds thousands of loose objects between its
   repacks, and listing them all cost each fetch, push and listing ~29 ms at 10,000
   (`LooseObjectLooks`).
4. Its ``config`` is read by libgit2 when it opens the repository, includes followed:
   a ``[include]`` or ``[includeIf]`` section (a FIFO or ``/dev/zero`` would hold the
   sync forever) is refused, and so is a config over `MAX_CONFIG_BYTES`.

Each refusal is one line naming the remote, what was found and what to do. What is
not caught: a file swapped after this look and before libgit2 opens it (a race the
writer must win at every sync); libgit2's reading of the objects themselves (it
checks every object's id as it copies it); a fan-out directory changed twice within
one tick of its filesystem's clock around a look, when that clock is behind ours by
more than `SETTLED_S` (a shared filesystem's server), once its first look was kept.
"""

from __future__ import annotations

import os
import pwd
import re
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import RemoteUnreachable, SyncError

__all__ = ["LooseObjectLooks", "PathRemote", "TRUST_SETTING", "inspect_path_remote"]

TRUST_SETTING = "trusted_remote_paths"
_REDIRECTS = ("commondir", "objects/info/alternates", "objects/info/http-alternates")
_FILES = ("HEAD", "config", "packed-refs", "refs/heads/a-sync")
MAX_CONFIG_BYTES = 1 << 20  # a remote's config is a few lines
_INCLUDE = re.compile(rb"\[[ \t]*include", re.IGNORECASE)  # anywhere: refusing a value that says so is cheap
_DIRS = ("refs", "refs/heads", "objects", "objects/pack", "objects/info")


@dataclass(frozen=True)
class PathRemote:
    """What the look found: the git directory, and whether the user owns it (else trusts it)."""

    git_dir: Path
    owned: bool


def _owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _trusted(git_dir: Path, given: Path, trusted: Sequence[str]) -> bool:
    for entry in trusted:
        if entry == "*":
            return True
        try:
            if Path(os.path.expanduser(entry)).resolve() in (git_dir, given):
                return True
        except OSError:
            continue
    return False


SETTLED_S = 2.0  # a fan-out directory changed more recently than this is listed at every look
KEPT_LOOKS = 8192  # fan-out directories remembered (256 a remote): forgotten all at once beyond


class LooseObjectLooks:
    """The fan-out directories found to hold regular files only, by device, inode and
    change time (module rule 3); one per process (`inspect_path_remote`'s default), shared
    by its threads. ``clock``: the wall clock the change times are compared with."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._lock = threading.Lock()
        self._clean: dict[tuple[int, int], int] = {}  # (st_dev, st_ino) -> st_ctime_ns when found clean

    def known_clean(self, st: os.stat_result) -> bool:
        with self._lock:
            return self._clean.get((st.st_dev, st.st_ino)) == st.st_ctime_ns

    def found_clean(self, st: os.stat_result, looked_at: float) -> None:
        """``st`` was taken before the listing that found it clean, begun at ``looked_at``."""
        if st.st_ctime_ns > int((looked_at - SETTLED_S) * 1e9):
            return  # changed too recently to tell a later change by its ctime
        with self._lock:
            if len(self._clean) >= KEPT_LOOKS:
                self._clean.clear()
            self._clean[(st.st_dev, st.st_ino)] = st.st_ctime_ns

    def now(self) -> float:
        return self._clock()


_LOOKS = LooseObjectLooks()


def inspect_path_remote(
    path: str, *, where: str, trusted: Sequence[str] = (), looks: LooseObjectLooks | None = None
) -> PathRemote:
    """Look at the repository at ``path`` (see the module rules) before libgit2 does.

    ``where`` names the remote in messages (``remote origin (/srv/team.git)``); ``looks``
    the fan-out directories found clean before (default: this process's).

    Raises:
        SyncError: one line saying what was refused and what to do.
    """
    given = Path(path).resolve()  # the path the user configured: theirs to choose
    dot_git = given / ".git"
    if os.path.lexists(dot_git):
        if not stat.S_ISDIR(os.lstat(dot_git).st_mode):
            raise SyncError(
                f"{where}: its .git is not a directory (a link or a pointer to another repository); "
                f"thrum does not follow it"
            )
        git_dir = dot_git
    else:
        git_dir = given
    try:
        st = os.lstat(git_dir)
    except OSError:
        raise RemoteUnreachable(f"{where} is unreachable: no git repository at that path") from None
    owned = st.st_uid == os.geteuid()
    if not owned and not _trusted(git_dir, given, trusted):
        raise SyncError(
            f"{where} belongs to {_owner_name(st.st_uid)}, not to you: thrum does not use a repository another "
            f"user owns (as git's safe.directory); if you trust its owner, add its path to "
            f'"{TRUST_SETTING}" in .thrum/config.json'
        )
    for rel in _REDIRECTS:
        if os.path.lexists(git_dir / rel):
            raise SyncError(
                f"{where} holds {rel}, which points to another repository; thrum does not follow it "
                f"(remove it there if it is not yours: someone with write access put it there)"
            )
    for rel in _FILES:
        _expect(git_dir, rel, stat.S_ISREG, "a regular file", where)
    for rel in _DIRS:
        _expect(git_dir, rel, stat.S_ISDIR, "a directory", where)
    _config(git_dir, where)
    _only_files(git_dir, "objects/pack", where)
    _loose_objects(git_dir, where, looks or _LOOKS)
    return PathRemote(git_dir, owned)


def _refuse(where: str, rel: str, what: str) -> SyncError:
    return SyncError(
        f"{where}: {rel} is {what}; thrum does not follow or open it (someone with write access to the "
        f"remote put it there: remove it, `git fsck` in that repository)"
    )


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a device or socket"


def _expect(git_dir: Path, rel: str, check: Callable[[int], bool], want: str, where: str) -> None:
    try:
        mode = os.lstat(git_dir / rel).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SyncError(f"{where}: cannot look at {rel} ({exc.strerror or exc})") from None
    if not check(mode):
        raise _refuse(where, rel, f"{_kind(mode)}, not {want}")


def _config(git_dir: Path, where: str) -> None:
    """Rule 4 (the file itself is a regular file: rule 3 looked)."""
    try:  # no link followed, no FIFO waited on, even if it was swapped since the look
        fd = os.open(git_dir / "config", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SyncError(f"{where}: cannot read its config ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(where, "config", f"{_kind(mode)}, not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise SyncError(f"{where}: cannot read its config ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise _refuse(where, "config", f"larger than {MAX_CONFIG_BYTES >> 20} MiB")
    if _INCLUDE.search(data):
        raise SyncError(
            f"{where}: its config includes other files ([include] or [includeIf]); thrum does not follow "
            f"them (remove that section there if it is not yours: someone with write access put it there)"
        )


def _only_files(git_dir: Path, rel: str, where: str) -> None:
    """Every entry of ``rel`` a regular file (the directory's own file types: no stat each)."""
    try:
        with os.scandir(git_dir / rel) as it:
            for entry in it:
                if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                    mode = entry.stat(follow_symlinks=False).st_mode
                    raise _refuse(where, f"{rel}/{entry.name}", _kind(mode))
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise _refuse(where, rel, "not a directory") from None


def _loose_objects(git_dir: Path, where: str, looks: LooseObjectLooks) -> None:
    """The 256 fan-out directories: real directories of regular files only; one listed
    before and unchanged since is not listed again (module rule 3)."""
    objects = git_dir / "objects"
    try:
        with os.scandir(objects) as it:
            fanout = [e for e in it if len(e.name) == 2]
    except OSError:
        return
    for entry in fanout:
        if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
            raise _refuse(where, f"objects/{entry.name}", _kind(entry.stat(follow_symlinks=False).st_mode))
        try:
            st = entry.stat(follow_symlinks=False)  # before the listing: a change during it shows next time
        except FileNotFoundError:
            continue  # removed since objects/ was listed (git's prune-packed)
        if not stat.S_ISDIR(st.st_mode):  # replaced since objects/ was listed
            raise _refuse(where, f"objects/{entry.name}", _kind(st.st_mode))
        if looks.known_clean(st):
            continue
        started = looks.now()
        _only_files(git_dir, f"objects/{entry.name}", where)
        looks.found_clean(st, started)
