"""Keeping the object stores compact, by git itself: ``git repack -d --geometric=2``.

Every sync step adds a small pack of whole objects to each store it writes (ours:
`gitstore.objbatch` and libgit2's fetches; a path remote: libgit2's pushes). Left
alone that is a pack per sync and, each blob being a whole copy of a segment,
several times the log's size. Rules:

1. git does the work (docs/design/decisions.md: thrum's own pack writer is gone):
   ``git repack -d --geometric=2`` rolls the smaller packs into one whenever they
   come near the next one's size, so every object is rewritten O(log n) times and a
   store holds O(log n) packs; loose objects go into the roll-up too. Needs git 2.32
   or newer on PATH; without it nothing is consolidated and ``thrum doctor`` says so.
2. It runs when a store gained `NEW_PACKS` packs since the last run (a directory
   listing decides, no git started otherwise), beside the syncs, never holding the
   log's lock or the replicator's: in a child process (the daemon: ``trio``'s
   ``run_process``, cancelled when it stops; the offline cycle: after its sync),
   at a lower CPU priority, with a time limit.
3. A path remote is another user's ground as much as ours (its writers can plant any
   file): git is never run in it. It is looked at first (`transport.pathremote`), then
   git repacks its ``objects`` directory from a private git directory of ours
   (``GIT_DIR`` ours, ``GIT_OBJECT_DIRECTORY`` theirs): the remote's config, hooks and
   refs are never read. A geometric roll-up needs no refs: it packs what the packs
   and loose objects hold.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .transport.pathremote import inspect_path_remote

log = logging.getLogger(__name__)

__all__ = ["MIN_GIT", "NEW_PACKS", "Repack", "Tidier", "git_version", "unavailable"]

MIN_GIT = (2, 32)
NEW_PACKS = 8  # packs a store gains before the next roll-up (a sync adds one or two)
TIMEOUT_S = 1800.0
NICENESS = 10  # the syncs beside it come first
_VERSION = re.compile(rb"git version (\d+)\.(\d+)")
_version_cache: dict[str, tuple[int, int] | None] = {}


def git_version(git: str | None = None) -> tuple[int, int] | None:
    """(major, minor) of the ``git`` on PATH, or None when there is none (remembered per path)."""
    path = git or shutil.which("git")
    if path is None:
        return None
    if path not in _version_cache:
        try:
            out = subprocess.run([path, "--version"], capture_output=True, timeout=10, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = b""
        m = _VERSION.search(out)
        _version_cache[path] = (int(m.group(1)), int(m.group(2))) if m else None
    return _version_cache[path]


def unavailable() -> str | None:
    """Why stores are not consolidated here (None: they are)."""
    version = git_version()
    if version is None:
        return "git is not installed"
    if version < MIN_GIT:
        return f"git {version[0]}.{version[1]} is older than {MIN_GIT[0]}.{MIN_GIT[1]} (no geometric repack)"
    return None


@dataclass(frozen=True)
class Repack:
    """One ``git repack`` to run: its argv and environment, and the objects it rolls up."""

    argv: list[str]
    env: dict[str, str]
    objects: Path


def _pack_count(objects: Path) -> int:
    try:
        with os.scandir(objects / "pack") as it:
            return sum(1 for e in it if e.name.endswith(".pack"))
    except OSError:
        return 0


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", **extra)
    return env


class Tidier:
    """Which stores are due a roll-up (rule 2), and the command for each.

    ``own`` is our repository's common dir (git runs in it as in any repository of the
    user's); ``private`` a directory of ours for the private git dir of rule 3.
    """

    def __init__(self, own: Path, private: Path, new_packs: int = NEW_PACKS):
        self.own = own
        self.private = private
        self.new_packs = new_packs
        self._packs_after: dict[Path, int] = {}

    def due(self, objects: Path) -> bool:
        """Whether ``objects`` gained ``new_packs`` packs since its last roll-up."""
        return _pack_count(objects) >= self._packs_after.get(objects, 0) + self.new_packs

    def done(self, objects: Path) -> None:
        self._packs_after[objects] = _pack_count(objects)

    def due_repacks(self, remote: Path | None = None, *, where: str = "", trusted: Sequence[str] = ()) -> list[Repack]:
        """The roll-ups due now (rule 2): ours, and a path remote's (``remote``: its
        directory) once it passed the look of rule 3. Nothing when git cannot (rule 1).

        Raises:
            SyncError: the path remote was refused (the sync says the same).
        """
        if unavailable() is not None:
            return []
        out = []
        if self.due(self.own / "objects"):
            out.append(self.own_repack())
        if remote is not None:
            git_dir = inspect_path_remote(str(remote), where=where, trusted=trusted).git_dir
            if self.due(git_dir / "objects"):
                out.append(self.remote_repack(git_dir))
        return out

    def own_repack(self) -> Repack:
        git = shutil.which("git") or "git"
        argv = [*_nice(), git, "--git-dir", str(self.own), *_REPACK]
        return Repack(argv, _environment({}), self.own / "objects")

    def remote_repack(self, git_dir: Path) -> Repack:
        """The roll-up of a path remote's objects from our private git dir (rule 3); the
        caller looked at the remote first (`transport.pathremote.inspect_path_remote`)."""
        git = shutil.which("git") or "git"
        private = self._private_git_dir(git)
        objects = git_dir / "objects"
        env = _environment({"GIT_DIR": str(private), "GIT_OBJECT_DIRECTORY": str(objects)})
        return Repack([*_nice(), git, *_REPACK], env, objects)

    def _private_git_dir(self, git: str) -> Path:
        if not (self.private / "HEAD").is_file():
            self.private.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [git, "init", "-q", "--bare", str(self.private)],
                env=_environment({}),
                capture_output=True,
                timeout=60,
                check=True,
            )
        return self.private

    def run(self, repack: Repack, timeout: float = TIMEOUT_S) -> str | None:
        """Run ``repack`` here, blocking (the offline cycle; a sync's worker thread); None
        when it worked, else why not (logged, never raised: a tidy-up never fails a sync)."""
        try:
            done = subprocess.run(repack.argv, env=repack.env, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return self.failed(repack, f"took longer than {timeout:.0f}s")
        except OSError as exc:
            return self.failed(repack, str(exc))
        return self.finished(repack, done.returncode, done.stderr)

    def finished(self, repack: Repack, returncode: int, stderr: bytes) -> str | None:
        """Note how a run ended (the daemon runs them itself); None when it worked, else why not."""
        if returncode != 0:
            lines = stderr.decode("utf-8", "replace").strip().splitlines()
            return self.failed(repack, lines[-1] if lines else f"git repack exited with {returncode}")
        self.done(repack.objects)
        return None

    def failed(self, repack: Repack, why: str) -> str:
        log.warning("could not consolidate %s: %s", repack.objects, why)
        return why


_REPACK = ("repack", "-d", "-q", "--geometric=2")


def _nice() -> list[str]:
    """``nice -n 10`` in front of git when there is a ``nice`` (rule 2)."""
    path = shutil.which("nice")
    return [path, "-n", str(NICENESS)] if path else []
