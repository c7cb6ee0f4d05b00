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
   ``run_process``, cancelled when it stops; offline: after the sync, a full one detached),
   at a lower CPU priority, with a time limit. In the daemon's session, not one of its
   own: Linux shares the CPU between sessions first (autogroups) and applies a process's
   nice only against its own session's, so a repack in a session of its own had an equal
   share beside the daemon's syncs, and one whose session was lowered too starved on a busy
   machine (stores at 1x the raw log within 700 rounds). In the daemon's session it yields
   to the daemon's syncs and keeps the daemon's share against the rest of the machine.
3. A path remote is another user's ground as much as ours (its writers can plant any
   file): git is never run in it. It is looked at first (`transport.pathremote`), then
   git repacks its ``objects`` directory from a private git directory of ours
   (``GIT_DIR`` ours, ``GIT_OBJECT_DIRECTORY`` theirs): the remote's config, hooks and
   refs are never read. A geometric roll-up needs no refs: it packs what the packs
   and loose objects hold.
4. git's delta search compares each object with the `WINDOW` objects next to it in an order
   sorted by a hash of the path's last 16 characters, then by size. thrum's segments end
   alike (``a_agent0/000002.jsonl``, ``b_agent3/000002.jsonl``: the agent's digit falls out
   of the hash too), so with git's default window of 10 a version's own next version was
   often out of reach and it became a delta of another agent's segment (kilobytes, where its
   own next version gives a few bytes): a full repack left a store at 1.1x the raw log, with
   a window of 30 at 0.36x (docs/design/decisions.md). And a roll-up can store an object as
   a delta only against objects in the same roll-up: the newest version of each segment it
   holds becomes such a cross-segment delta, and later roll-ups reuse it as it is (git
   re-searches only what it stored whole). So when a store's packs have grown by
   `FULL_GROWTH` since its last full repack (or it never had one), the roll-up is a full
   repack instead: ``git repack -a -d -f --keep-unreachable --keep-pack=<the last full
   repack's pack>`` (every delta of what came since searched again), then ``git repack -a -d
   --keep-unreachable --write-bitmap-index`` (the two merged, deltas reused; only objects
   stored whole are searched, against the other pack's). So each delta is searched once, not
   at every growth (a whole store's search cost ~15 s of CPU at 5,000 rounds); the price,
   and why a pack with the mark is taken as it is whoever wrote it: docs/design/decisions.md
   ("Each delta searched once"). A store never repacked whole is searched whole in one run.
   ``--keep-unreachable`` keeps what no ref names yet (a sync step's pack written a moment
   before its ref moves), so nothing is ever dropped. git finds names for the delta search
   by walking from refs, so a path remote's full repack runs with our remote-tracking refs
   as refs of the private git dir (our refs, never the remote's; those whose objects it
   holds): without any, every object is "unreachable", kept without a delta, and the store
   grew to 4x. The bytes after each full repack (after the roll-up that follows it: the
   syncs' packs that arrived while it ran hold whole objects, several times their rolled-up
   size, and counted as they were they put the next full repack that much further off) are
   kept in ``repacks.json`` beside the private git dir, so a restart does not start the
   count again; a full repack's pack carries a bitmap, and the largest pack with one counts
   as the store's last full repack, whichever replica of a shared remote ran it (each one's
   own record alone had both repack it whole at every doubling), counted as our own from our
   next roll-up (as the one that ran it does), unless the store has doubled since that pack;
   a record larger than the store (packs rewritten or removed: a planted one) is lowered to
   the store as it is; roll-ups leave that pack out (``--keep-pack``) until the next full
   repack: git weighs packs by their objects, and took it in once the packs since held half
   as many, long before a doubling and often before the other replica looked. The growth is
   the store's as our last repack left it, not with the syncs' packs since: those hold whole
   objects (~4x the raw log a round, ~1x once rolled up), so a store with a few of them
   looked doubled long before it was.
5. One repack of a store at a time (the tidier of each replica that shares a path
   remote, the daemon's and an offline cycle's): each holds an ``flock`` (`packdir`) on the store's
   ``objects`` directory while its child runs (the child inherits it, so it outlives a
   killed daemon until git is done); a tidier that finds it held skips that store this
   time; one that gets it decides a full repack again (`Tidier.recheck`: another's may
   have run since it decided). Two repacks of one store each delete the packs they listed: the second failed
   ("cannot open index for ...": a pack the first had just removed). Readers are safe
   as with any git repack: the new pack is in place before the old ones go, and git
   and libgit2 look for a missing object again in the packs now there. A local
   ``git clone`` of a path remote is not a reader of that kind: it links the files it
   listed, so a pack removed meanwhile is missing from the copy (git's own repacks race
   it the same way); clone with ``--no-local`` or a ``file://`` URL.
6. A repack runs in its own process group (in our session: rule 2) and is ended as a
   group (its time limit, the daemon stopping): ``git repack`` runs ``git pack-objects``
   as its child, which would otherwise write on, orphaned. A killed writer leaves its temporary files in
   ``objects/pack`` (git repack's ``.tmp-<pid>-pack-*``, pack-objects' ``tmp_pack_*``,
   libgit2's ``pack_git2_*``, objbatch's ``tmp_pack_thrum_*``), and git removes only
   its own process's: before a store's roll-up, and when a tidier first sees a store,
   those named as temporary and untouched for `packdir.STALE_TEMP_S` are removed (never a
   ``pack-*`` file; nothing that young can belong to a live repack of ours).
"""

from __future__ import annotations

import json
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import packdir, repackfailures
from .transport.pathremote import inspect_path_remote

log = logging.getLogger(__name__)

__all__ = ["FULL_GROWTH", "MIN_GIT", "NEW_PACKS", "ChildClock", "Repack", "Tidier", "git_version", "unavailable"]

MIN_GIT = (2, 32)
NEW_PACKS = 8  # packs a store gains before the next roll-up (a sync adds one or two)
FULL_GROWTH = 2.0  # packs grown by this factor since the last full repack: the next roll-up is a full one (rule 4)
TIMEOUT_S = 1800.0
WINDOW = 30  # objects git compares for a delta (its default 10 misses a segment's own versions: rule 4)
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
    """A repack to run: its ``git repack`` commands in turn (rule 4), their environment, its store."""

    steps: tuple[list[str], ...]
    env: dict[str, str]
    objects: Path
    full: bool = False


class ChildClock:
    """Wall time, and the CPU of this process's children that ended (``RUSAGE_CHILDREN``:
    git repack with its pack-objects), since it was made: what a repack cost, for the log
    and the storage benchmark. Another child that ends meanwhile counts too (the daemon
    runs few)."""

    def __init__(self) -> None:
        self._wall = time.monotonic()
        self._cpu = self._children()

    @staticmethod
    def _children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def read(self) -> tuple[float, float]:
        return time.monotonic() - self._wall, self._children() - self._cpu


def stop_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the process group a repack leads (rule 6), if it is still there."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", **extra)
    return env


class Tidier:
    """Which stores are due a roll-up (rule 2) or a full repack (rule 4), and the command for each.

    ``own`` is our repository's common dir (git runs in it as in any repository of the
    user's); ``private`` a directory of ours for the private git dir of rule 3; the
    record of full repacks is kept beside it (``repacks.json``).
    """

    def __init__(self, own: Path, private: Path, new_packs: int = NEW_PACKS, full_growth: float = FULL_GROWTH):
        self.own = own
        self.private = private
        self.new_packs = new_packs
        self.full_growth = full_growth
        self._packs_after: dict[Path, int] = {}
        self._rolled: dict[Path, int] = {}  # pack bytes after our last repack of each store
        self._settling: set[Path] = set()  # fully repacked, the syncs' packs beside it not rolled up yet
        self._adopted: dict[Path, int] = {}  # ... by another replica: the bytes of its full pack
        self._swept: set[Path] = set()  # stores whose stale temporaries were removed once (rule 6)
        self._record = private.parent / "repacks.json"
        self._full_after = self._load()  # objects dir -> its pack bytes after its last full repack

    def _load(self) -> dict[str, int]:
        try:
            data = json.loads(self._record.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, int) and v >= 0}

    def _save(self) -> None:
        tmp = self._record.with_name(f".{self._record.name}.{os.getpid()}.tmp")
        try:
            self._record.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self._full_after, sort_keys=True))
            os.replace(tmp, self._record)
        except OSError as exc:  # the next start counts from a full repack again: a cost, never a loss
            log.warning("cannot record the full repacks in %s: %s", self._record, exc)

    def due(self, objects: Path) -> bool:
        """Whether ``objects`` gained ``new_packs`` packs since its last roll-up; the stale
        temporary files of a killed writer go first (rule 6), when it is or at the first look."""
        due = packdir.pack_count(objects) >= self._packs_after.get(objects, 0) + self.new_packs
        if due or objects not in self._swept:
            self._swept.add(objects)
            packdir.sweep_temporaries(objects)
        return due

    def full_due(self, objects: Path) -> bool:
        """Whether the next roll-up of ``objects`` is a full repack (rule 4); another
        replica's full repack of a shared remote counts too (its pack has a bitmap)."""
        after = self._full_after.get(str(objects))
        other = packdir.bitmapped_bytes(objects)
        if other is not None and (after is None or other > after):
            # remembered: a later roll-up rewrites that pack without its bitmap, and each
            # replica's own older record had it repack the remote whole again; counted as
            # our own is, from our next roll-up (`done`): the replica that ran it records the
            # store with the syncs' packs beside it rolled up, and one that kept the full pack
            # alone was due early
            after = self._full_after[str(objects)] = self._rolled[objects] = self._adopted[objects] = other
            self._save()
        elif after is not None and (there := packdir.pack_bytes(objects)) < after:
            # the store is smaller than the record: its packs were rewritten or removed since
            # (the remote is untrusted: a planted pack taken for a full repack must not hold
            # the next one off once it is gone); counted from the store as it is now
            after = self._full_after[str(objects)] = self._rolled[objects] = there
            self._save()
        # the store as our last repack of it left it: the packs of the syncs since hold whole
        # objects, several times their rolled-up size (the next roll-up decides again)
        now = self._rolled.get(objects)
        return after is None or (packdir.pack_bytes(objects) if now is None else now) >= after * self.full_growth

    def done(self, objects: Path, full: bool = False) -> None:
        # a full repack leaves one pack; the syncs' packs that arrived while it ran (minutes,
        # on a large store) are due for a roll-up at once, not after `new_packs` more
        self._packs_after[objects] = 1 if full else packdir.pack_count(objects)
        repackfailures.clear(self._record.parent, objects)
        now = self._rolled[objects] = packdir.pack_bytes(objects)
        # another replica's full repack (`full_due`) counts from here too, unless the store has
        # grown by the factor since that full pack: the syncs since and the pile beside it
        # cannot be told apart, and a record taken that late would put the next one off too far
        adopted = self._adopted.pop(objects, None)
        if full or objects in self._settling or (adopted is not None and now < adopted * self.full_growth):
            self._full_after[str(objects)] = now  # rule 4: counted from the roll-up after a full repack
            self._save()
            if full:
                self._settling.add(objects)
            else:
                self._settling.discard(objects)

    def due_repacks(self, remote: Path | None = None, *, where: str = "", trusted: Sequence[str] = ()) -> list[Repack]:
        """The roll-ups due now (rule 2): ours, and a path remote's (``remote``: its
        directory) once it passed the look of rule 3. Nothing when git cannot (rule 1).

        Raises:
            SyncError: the path remote was refused (the sync says the same).
        """
        if unavailable() is not None:
            return []
        out = []
        own = self.own / "objects"
        if self.due(own):
            out.append(self.own_repack(full=self.full_due(own)))
        if remote is not None:
            git_dir = inspect_path_remote(str(remote), where=where, trusted=trusted).git_dir
            if self.due(git_dir / "objects"):
                out.append(self.remote_repack(git_dir, full=self.full_due(git_dir / "objects")))
        return out

    def recheck(self, repack: Repack) -> Repack:
        """``repack`` as due now, called with the store's lock held (rule 5): a full repack
        decided before another process's full repack of that store ran (a replica's tidy
        decides its repacks together, then runs them in turn) is a roll-up now; made again."""
        if not repack.full:
            return repack
        full = self.full_due(repack.objects)
        if repack.objects == self.own / "objects":
            return self.own_repack(full)
        return self.remote_repack(repack.objects.parent, full)

    def own_repack(self, full: bool = False) -> Repack:
        git = shutil.which("git") or "git"
        objects = self.own / "objects"
        steps = _steps([*_nice(), git, "--git-dir", str(self.own)], objects, full)
        return Repack(steps, _environment({}), objects, full)

    def remote_repack(self, git_dir: Path, full: bool = False) -> Repack:
        """The roll-up of a path remote's objects from our private git dir (rule 3); the
        caller looked at the remote first (`transport.pathremote.inspect_path_remote`).
        The private dir has no refs: in a full repack every object is kept as unreachable."""
        git = shutil.which("git") or "git"
        private = self._private_git_dir(git)
        objects = git_dir / "objects"
        env = _environment({"GIT_DIR": str(private), "GIT_OBJECT_DIRECTORY": str(objects)})
        if full:
            self._name_tips(git, env)
        return Repack(_steps([*_nice(), git], objects, full), env, objects, full)

    def _name_tips(self, git: str, env: dict[str, str]) -> None:
        """Our remote-tracking refs as the private git dir's refs (rule 4), those whose objects
        the remote holds; the refs of an earlier run are replaced."""

        def run(*args: str, environ: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run([git, *args], env=environ, capture_output=True, timeout=60, check=False)

        listed = run(
            "--git-dir",
            str(self.own),
            "for-each-ref",
            "--format=%(objectname)",
            "refs/remotes/",
            environ=_environment({}),
        )
        old = run("for-each-ref", "--format=%(refname)", "refs/thrum/", environ=env)
        for name in old.stdout.decode().split():
            run("update-ref", "-d", name, environ=env)
        tips = sorted(set(listed.stdout.decode().split()))
        for n, tip in enumerate(tips):  # update-ref refuses an object the remote does not hold
            run("update-ref", f"refs/thrum/tip-{n}", tip, environ=env)

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
        when it worked or another process is repacking that store (rule 5), else why not
        (logged, never raised: a tidy-up never fails a sync)."""
        with packdir.locked_store(repack.objects) as lock:
            if lock is None:
                log.info("not repacking %s: another process is", repack.objects)
                return None
            repack = self.recheck(repack)
            clock = ChildClock()
            deadline = time.monotonic() + timeout
            for argv in repack.steps:
                try:
                    child = subprocess.Popen(
                        argv,
                        env=repack.env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE,
                        pass_fds=(lock,),
                        process_group=0,  # rule 6: ended as a group; rule 2: in our session
                    )
                except OSError as exc:
                    return self.failed(repack, str(exc))
                try:
                    _, stderr = child.communicate(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    stop_group(child.pid)
                    child.communicate()
                    return self.failed(repack, f"took longer than {timeout:.0f}s")
                if child.returncode != 0:
                    break
            return self.finished(repack, child.returncode, stderr, clock)

    def finished(self, repack: Repack, returncode: int, stderr: bytes, clock: ChildClock | None = None) -> str | None:
        """Note how a run ended (the daemon runs them itself); None when it worked, else why not.
        ``clock``: started before the child, for the log line that says what it cost."""
        if returncode != 0:
            lines = stderr.decode("utf-8", "replace").strip().splitlines()
            return self.failed(repack, lines[-1] if lines else f"git repack exited with {returncode}")
        self.done(repack.objects, repack.full)
        if clock is not None:
            wall, cpu = clock.read()
            log.info(
                "repacked %s (%s) in %.2f s, %.2f s of CPU; %d packs, %.2f MiB now",
                repack.objects,
                "full" if repack.full else "roll-up",
                wall,
                cpu,
                packdir.pack_count(repack.objects),
                packdir.pack_bytes(repack.objects) / 2**20,
            )
        return None

    def failed(self, repack: Repack, why: str) -> str:
        log.warning("could not consolidate %s: %s", repack.objects, why)
        repackfailures.note(self._record.parent, repack.objects, why)  # for `thrum doctor`
        return why


_REPACK = ("repack", "-d", "-q", "--geometric=2", f"--window={WINDOW}")
# rule 4: every delta searched again, then (_MERGE) reused; nothing dropped, not even what no ref names yet
_FULL = ("repack", "-a", "-d", "-f", "-q", "--keep-unreachable", f"--window={WINDOW}")
_MERGE = tuple(arg for arg in _FULL if arg != "-f")


def _steps(git: list[str], objects: Path, full: bool) -> tuple[list[str], ...]:
    """The ``git repack`` commands of a roll-up or a full repack (rule 4), ``git`` in front."""
    last = packdir.bitmapped_pack(objects)  # the last full repack's pack, whoever ran it
    if not full:  # kept out until the next full repack
        return ([*git, *_REPACK, *([f"--keep-pack={last[0]}"] if last else [])],)
    if last is None:  # never repacked whole: everything searched
        return ([*git, *_FULL, "--write-bitmap-index"],)
    return (  # what came since searched, then merged with it as it is
        [*git, *_FULL, f"--keep-pack={last[0]}", "--no-write-bitmap-index"],
        [*git, *_MERGE, "--write-bitmap-index"],
    )


def _nice() -> list[str]:
    """``nice -n 10`` in front of git when there is a ``nice`` (rule 2)."""
    path = shutil.which("nice")
    return [path, "-n", str(NICENESS)] if path else []
