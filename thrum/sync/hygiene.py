"""Keep the object stores that hold ``a-sync`` compact over months of syncs.

Every sync step writes its new objects (a new blob per touched log file, new
trees, a commit) as one small pack of whole objects (`objbatch`), on the replica
and in a remote on a local filesystem. Left alone that is a pack per sync and,
because each blob is a whole copy of its file, many times the log's size. Rules:

1. When a store holds `LOOSE_TRIGGER` loose objects or more (libgit2, or git
   itself, wrote some), the loose objects of ``a-sync``'s history (walked from its
   refs, through loose commits only) are written into one pack (`packs`),
   verified, and only then deleted. Loose objects that are not thrum's (the user's
   own work, shared in one object store) are never touched.
2. Packs thrum wrote (listed in ``objects/info/thrum-packs``, with the packs that
   thrum's fetches brought: `packrecord`) are kept in a geometric progression of
   their object counts: when the smaller packs together come near the count of the
   next one, they are rolled into one, once that takes `ROLL_MIN` packs or more (or
   the store holds more than `MAX_PACKS`). So every object is rewritten O(log n) times
   over the history, and a store holds O(log n) packs besides a few syncs' own.
   Packs thrum did not write are never touched.
3. It never blocks a sync: it takes no lock a sync takes, runs in a child process
   (the daemon, `thrum.sync.hygiene_child`: reading every object of a growing store
   leaves the allocator's high-water mark behind, and the daemon must not keep it)
   or after the cycle (offline sync), and another process doing the same work on
   the same store (a shared remote) makes it skip, through a lock file. Readers
   that meet a deleted loose object or pack find it in the new pack (libgit2
   rescans its packs on a miss).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from . import SyncError
from .gitstore.gitlib import objects_dir, open_repo, read_tree
from .gitstore.packrecord import record_packs, recorded_packs, save_record
from .gitstore.packs import BLOB, COMMIT, TREE, PackedObject, read_index, write_pack
from .remotefiles import refuse_special_files

log = logging.getLogger(__name__)

__all__ = ["LOOSE_TRIGGER", "Consolidation", "consolidate", "has_work", "loose_count"]

LOOSE_TRIGGER = 256
FACTOR = 2
ROLL_MIN = 8  # small packs rolled up together (a sync writes one: `objbatch`)
MAX_PACKS = 24  # past this, any geometric roll is done however few packs it takes
STALE_LOCK_S = 600
_SEEN_AT_TRIGGER = 32  # loose objects `has_work` expects to see at the trigger: it lists that share of the fan-out
_LOCK = "thrum-consolidate.lock"
_TIPS = ("refs/heads/a-sync",)
_TRACKING_SUFFIX = "/a-sync"
_not_ours: dict[Path, int] = {}  # store -> its loose count when too few of them were thrum's to pack


@dataclass
class Consolidation:
    """What one run did."""

    loose_packed: int = 0
    packs_rolled: int = 0
    new_packs: list[str] = field(default_factory=list)
    skipped: str | None = None  # why nothing was done
    seconds: float = 0.0
    declined_loose: int = 0  # loose objects left alone: too few were thrum's (look again when more come)


def loose_count(objects: Path, sample: int = 256) -> int:
    """How many loose objects a store holds: a listing of its 256 fan-out directories, or
    an estimate from the first ``sample`` of them (object ids are uniformly spread, as
    `git gc --auto` assumes; the daemon asks after every sync, for two stores)."""
    total = 0
    for i in range(sample):
        try:
            total += sum(1 for name in os.listdir(objects / f"{i:02x}") if len(name) == 38)
        except FileNotFoundError:
            continue
    return total * 256 // sample


def consolidate(git_dir: os.PathLike | str, *, loose_trigger: int = LOOSE_TRIGGER) -> Consolidation:
    """One round of rules 1 and 2 on the repository at ``git_dir`` (a common dir or a bare remote)."""
    started = time.monotonic()
    report = Consolidation()
    try:
        refuse_special_files(Path(git_dir))
        repo = open_repo(git_dir)
    except pygit2.GitError as exc:
        report.skipped = f"not a repository: {exc}"
        return report
    except SyncError as exc:
        report.skipped = str(exc)
        return report
    objects = objects_dir(repo)
    with _locked(objects) as got:
        if not got:
            report.skipped = "another process is consolidating this store"
            return report
        _remove_stale_staging(objects)
        try:
            count = loose_count(objects)
            if count >= loose_trigger and count >= _not_ours.get(objects, 0) + loose_trigger // 2:
                if not _pack_loose(repo, objects, report, loose_trigger):
                    _not_ours[objects] = report.declined_loose = count  # the user's own: look again later

            _roll_up(repo, objects, report)
        except (OSError, KeyError, ValueError, pygit2.GitError) as exc:  # e.g. `git gc` ran meanwhile
            log.warning("could not consolidate %s: %s", objects, exc)
            report.skipped = str(exc)
        finally:
            repo.free()  # the packs it deleted: let go of them now, not at the next full collection
    report.seconds = time.monotonic() - started
    log_result(objects, report)
    return report


def log_result(where: os.PathLike | str, report: Consolidation) -> None:
    if report.new_packs:
        log.info(
            "consolidated %s: %d loose objects packed, %d packs rolled into %s (%.2fs)",
            where,
            report.loose_packed,
            report.packs_rolled,
            ", ".join(report.new_packs),
            report.seconds,
        )


def has_work(git_dir: os.PathLike | str, *, loose_trigger: int = LOOSE_TRIGGER) -> bool:
    """Whether `consolidate` would pack or roll up anything (a listing and a few stats, no
    object read), so the daemon starts a child process only when there is work."""
    try:
        refuse_special_files(Path(git_dir))  # a shared remote's FIFO would stop the daemon's tidy-ups for good
        objects = objects_dir(open_repo(git_dir))
    except (pygit2.GitError, SyncError):
        return False
    count = loose_count(objects, sample=_fanout_sample(loose_trigger))
    if count >= loose_trigger and count >= _not_ours.get(objects, 0) + loose_trigger // 2:
        return True
    return bool(_rollable(recorded_packs(objects)))


def _fanout_sample(loose_trigger: int) -> int:
    """How many of the 256 fan-out directories to list so that, at the trigger, about
    `_SEEN_AT_TRIGGER` loose objects are seen (all 256 for a trigger that low)."""
    share = _SEEN_AT_TRIGGER / max(1, loose_trigger)
    return min(256, math.ceil(256 * share))


def note_declined(git_dir: os.PathLike | str, count: int) -> None:
    """Remember what a child process found: ``count`` loose objects, too few of them thrum's."""
    try:
        _not_ours[objects_dir(open_repo(git_dir))] = count
    except pygit2.GitError:
        pass


# --- rule 1: loose objects ----------------------------------------------------------------


def _loose_ids(objects: Path) -> set[bytes]:
    found = set()
    for i in range(256):
        prefix = f"{i:02x}"
        try:
            names = os.listdir(objects / prefix)
        except FileNotFoundError:
            continue
        for name in names:
            if len(name) == 38:
                try:
                    found.add(bytes.fromhex(prefix + name))
                except ValueError:
                    continue
    return found


def _tips(repo: pygit2.Repository) -> list[pygit2.Oid]:
    tips = []
    for name in repo.references:
        if name in _TIPS or (name.startswith("refs/remotes/") and name.endswith(_TRACKING_SUFFIX)):
            try:
                tips.append(repo.references[name].resolve().target)
            except (KeyError, pygit2.GitError):
                continue
    return tips


def _pack_loose(repo: pygit2.Repository, objects: Path, report: Consolidation, trigger: int) -> bool:
    loose = _loose_ids(objects)
    commits, stack, seen = [], [t.raw for t in _tips(repo)], set()
    while stack:
        raw = stack.pop()
        if raw in seen or raw not in loose:
            continue
        seen.add(raw)
        commit = repo[pygit2.Oid(raw=raw)]
        if not isinstance(commit, pygit2.Commit):
            continue
        commits.append(commit)
        stack.extend(p.raw for p in commit.parent_ids)
    chosen = _with_names(repo, commits, loose)
    if len(chosen) < max(1, trigger // 2):  # the rest is not ours (the user's work): leave it to git
        return False
    name = write_pack(objects, chosen.values(), _reader(repo))
    record_packs(objects, [name])
    for raw in chosen:
        hexs = raw.hex()
        try:
            os.unlink(objects / hexs[:2] / hexs[2:])
        except FileNotFoundError:
            pass
    report.loose_packed += len(chosen)
    report.new_packs.append(name)
    _not_ours.pop(objects, None)
    return True


def _with_names(repo: pygit2.Repository, commits: list[pygit2.Commit], among: set[bytes]) -> dict:
    """The commits and the trees and blobs they introduce (vs their first parent) that are
    ``among`` the given ids, each with its path (the delta heuristics group by path)."""
    chosen: dict[bytes, PackedObject] = {}
    for commit in sorted(commits, key=lambda c: -c.commit_time):
        chosen[commit.id.raw] = PackedObject(commit.id.raw, COMMIT, 0)
        parent_tree = None
        if commit.parent_ids:
            try:
                parent_tree = repo[commit.parent_ids[0]].tree_id
            except KeyError:
                parent_tree = None
        _diff_names(repo, parent_tree, commit.tree_id, b"/", among, chosen)
    for raw, obj in chosen.items():
        obj.size = repo.odb.read_header(pygit2.Oid(raw=raw))[1]
    return chosen


def _diff_names(repo, old: pygit2.Oid | None, new: pygit2.Oid, path: bytes, among: set[bytes], chosen: dict) -> None:
    if new.raw not in among or new.raw in chosen:
        return
    chosen[new.raw] = PackedObject(new.raw, TREE, 0, path)
    a = read_tree(repo, old) if old is not None and old.raw != new.raw else {}
    for name, (mode, oid_raw) in read_tree(repo, new).items():
        before = a.get(name)
        if before is not None and before[1] == oid_raw:
            continue
        child = path + name if path == b"/" else path + b"/" + name
        if mode == 0o40000:
            sub_old = pygit2.Oid(raw=before[1]) if before is not None and before[0] == 0o40000 else None
            _diff_names(repo, sub_old, pygit2.Oid(raw=oid_raw), child, among, chosen)
        elif mode != 0o160000 and oid_raw in among and oid_raw not in chosen:
            chosen[oid_raw] = PackedObject(oid_raw, BLOB, 0, child)


def _reader(repo: pygit2.Repository):
    def read(raw: bytes) -> bytes:
        return repo.odb.read(pygit2.Oid(raw=raw))[1]

    return read


# --- rule 2: packs, geometrically -------------------------------------------------------------


def _roll_up(repo: pygit2.Repository, objects: Path, report: Consolidation) -> None:
    packs = recorded_packs(objects)
    rolled = _rollable(packs)
    if not rolled:
        return
    among: set[bytes] = set()
    for name in rolled:
        among.update(read_index(objects / "pack" / f"{name}.idx"))
    commits = []
    for raw in among:
        kind, _ = repo.odb.read_header(pygit2.Oid(raw=raw))
        if int(kind) == COMMIT:
            commits.append(repo[pygit2.Oid(raw=raw)])
    chosen = _with_names(repo, commits, among)
    for raw in among - chosen.keys():  # objects no commit in these packs introduces: whole, unnamed
        kind, size = repo.odb.read_header(pygit2.Oid(raw=raw))
        chosen[raw] = PackedObject(raw, int(kind), size)
    name = write_pack(objects, chosen.values(), _reader(repo))
    gone = set(rolled) - {name}
    # Read again: syncs appended their packs meanwhile (names of deleted packs drop out).
    save_record(objects, [n for _, n in recorded_packs(objects) if n not in gone] + [name])
    for old in rolled:
        if old == name:
            continue
        for suffix in (".idx", ".pack", ".rev", ".bitmap"):  # the index first: readers look for it
            (objects / "pack" / f"{old}{suffix}").unlink(missing_ok=True)
    report.packs_rolled += len(rolled)
    report.new_packs.append(name)


def _rollable(packs: list[tuple[int, str]]) -> list[str]:
    """The packs to roll into one now, if any: a geometric roll (`_to_roll`) that takes
    `ROLL_MIN` packs or more, or any once the store holds more than `MAX_PACKS`.

    Every sync adds a small pack (`objbatch`): rolling as soon as two are alike would
    start a consolidation after every other sync, for a gain of one pack."""
    rolled = _to_roll(packs)
    if len(rolled) >= ROLL_MIN or (len(packs) > MAX_PACKS and len(rolled) >= 2):
        return rolled
    return []


def _to_roll(packs: list[tuple[int, str]]) -> list[str]:
    """Which packs (object counts ascending) to roll into one so the rest stay geometric (factor 2)."""
    split = 0
    for i in range(len(packs) - 1, 0, -1):
        if packs[i][0] < FACTOR * packs[i - 1][0]:
            split = i
            break
    if split == 0:
        return []
    total = sum(size for size, _ in packs[: split + 1])
    j = split + 1
    while j < len(packs) and packs[j][0] < FACTOR * total:
        total += packs[j][0]
        j += 1
    return [name for _, name in packs[:j]]


# --- the record and the lock -------------------------------------------------------------------


def _remove_stale_staging(objects: Path) -> None:
    """Staging directories `packs.write_pack`, and temporary files `packs.write_plain_pack`,
    left behind when their process died."""
    for f in (objects / "pack").glob("tmp_*_thrum_*"):
        try:
            if time.time() - f.stat().st_mtime > STALE_LOCK_S:
                f.unlink()
        except OSError:
            continue
    if not shutil.rmtree.avoids_symlink_attacks:  # a shared remote's pushers could race it: leave them
        return
    for d in objects.glob("thrum-tmp-*"):
        try:
            st = d.lstat()  # never through a link: a shared remote's pushers can plant one here
            if stat.S_ISDIR(st.st_mode) and time.time() - st.st_mtime > STALE_LOCK_S:
                # File-descriptor based on Linux: a directory swapped for a link after this
                # check is refused, never followed (unlike a walk by path names).
                shutil.rmtree(d)
        except OSError:
            continue


@contextmanager
def _locked(objects: Path):
    path = objects / _LOCK
    try:
        if time.time() - path.stat().st_mtime > STALE_LOCK_S:  # left by a process that died
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        yield False
        return
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        os.close(fd)
        yield True
    finally:
        path.unlink(missing_ok=True)
