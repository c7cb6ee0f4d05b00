"""The log files of a tree written into a new worktree: by two other processes when there are many.

Rules:

1. libgit2 never checks the ``a-sync`` branch out (`worktree` rule 5): thrum writes the
   log files of its tree (`trees.LayoutTrees.log_files`, nothing else) through
   `thrum.durable` (each file whole or not at all, no link followed) and records them
   in the index with the stat of what was written.
2. Reading a blob (libgit2 inflating it) holds the GIL, so one process uses one core
   however its writes are threaded. From `SPLIT_FILES` files on (a first attach to a
   large history: ~11,500 files, 738 MiB at a million events), two processes
   (``python -m thrum.sync.checkout``) each write half of the files while this one waits:
   on two cores the checkout takes about half as long. They read without hashing each
   blob again (`gitlib.skip_hash_checks`, process-wide, which this process, maybe a
   daemon with other work, must not switch off): half the CPU of the reads.
3. A second process only writes what it is told (blob ids and paths, on its stdin;
   the blobs were checked by `trees.LayoutTrees`) and prints how many files it has
   written after each batch (the first one's lines are the progress shown). When one
   cannot start, fails or says another count, this process writes its files itself:
   a failed helper costs time, never a file.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from thrum import durable, nofollow

from .gitstore.api import Oid
from .trees import Leaf

log = logging.getLogger(__name__)

__all__ = ["SPLIT_FILES", "write_log_files"]

SPLIT_FILES = 2048  # from here a second process pays for its start (~0.1 s) several times over
BATCH = 256  # files written with one fsync round (`durable.write_batch`): at most ~16 MiB held

Files = list[tuple[str, Leaf]]
Index = dict[str, tuple[Oid, os.stat_result]]


def write_log_files(
    read: Callable[[Oid], bytes],
    root: Path,
    files: Files,
    *,
    progress: Callable[[int], None] | None = None,
    python: str = sys.executable,
) -> Index:
    """Write ``files`` (path, blob) under ``root``; the index entries of what was written.

    ``read``: a blob's content by id. ``progress``: told after each batch about how many
    files are written (the first helper's share scaled to all: the other writes alongside
    at the same pace). ``python``: the interpreter the helpers run on.

    Raises:
        UnsafePath: a directory on the way is a link or not a directory (`thrum.durable`).
    """
    index: Index = {}
    if len(files) < SPLIT_FILES or _cores() < 2:
        _write(read, root, files, index, progress)
        if progress is not None:
            progress(len(files))
        log.info("checked out %d log files", len(files))
        return index
    half = len(files) // 2
    parts = [files[:half], files[half:]]
    helpers = [_start(root, part, python) for part in parts]
    helped = 0
    try:
        for n, (part, helper) in enumerate(zip(parts, helpers)):
            told = progress if n == 0 else None  # the first one's pace is the whole's
            scale = len(files) / len(part)
            if helper is not None and _finished(helper, len(part), told, scale) and _stat_into(root, part, index):
                helped += len(part)
            else:
                _write(read, root, part, index, told, scale)
            helpers[n] = None
        if progress is not None:
            progress(len(files))
    finally:
        for helper in helpers:  # one failed: the other's work is not wanted
            if helper is not None:
                helper.kill()
                helper.wait()
    log.info("checked out %d log files%s", len(files), f" ({helped} by other processes)" if helped else "")
    return index


def _cores() -> int:
    """The cores this process may run on (its affinity: a container's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this system
        return os.cpu_count() or 1


def _write(
    read: Callable[[Oid], bytes],
    root: Path,
    files: Files,
    index: Index,
    progress: Callable[[int], None] | None = None,
    scale: float = 1.0,
) -> None:
    for i in range(0, len(files), BATCH):
        part = files[i : i + BATCH]
        for (path, leaf), st in zip(part, durable.write_batch(root, [(p, read(leaf.oid)) for p, leaf in part])):
            index[path] = (leaf.oid, st)
        if progress is not None and i + BATCH < len(files):
            progress(int((i + BATCH) * scale))


def _start(root: Path, files: Files, python: str) -> subprocess.Popen[bytes] | None:
    """A helper, its files on its stdin (from a temporary file: nothing here waits for it
    to read them); None when it cannot start (rule 3)."""
    try:
        with tempfile.TemporaryFile() as listing:
            listing.write(b"".join(b"%s\0%s\0" % (leaf.oid.hex.encode(), path.encode()) for path, leaf in files))
            listing.seek(0)
            return subprocess.Popen(
                [python, "-m", "thrum.sync.checkout", str(root)],
                stdin=listing,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
            )
    except OSError as exc:
        log.warning("cannot start a second process for the checkout (%s); writing its files here", exc)
        return None


def _finished(
    helper: subprocess.Popen[bytes], expected: int, progress: Callable[[int], None] | None, scale: float
) -> bool:
    """Whether the helper wrote its ``expected`` files (its last line says how many);
    ``progress`` told of each of its lines as it comes (its stderr is read at its end: it
    writes there only when it fails, far less than a pipe holds)."""
    assert helper.stdout is not None and helper.stderr is not None
    last = b""
    for line in helper.stdout:
        last = line.strip()
        if progress is not None and last.isdigit() and int(last) < expected:
            progress(int(int(last) * scale))
    err = helper.stderr.read()
    helper.wait()
    if helper.returncode == 0 and last == str(expected).encode():
        return True
    why = err.decode(errors="replace").strip().splitlines()[-1:] or [f"it printed {last[:40]!r}"]
    log.warning("the checkout's second process failed (exit %s: %s); writing its files here", helper.returncode, why[0])
    return False


def _stat_into(root: Path, files: Files, index: Index) -> bool:
    """The index entries of files the second process wrote; False when one is not there."""
    by_dir: dict[str, list[tuple[str, str, Leaf]]] = {}
    for path, leaf in files:
        parent, _, name = path.rpartition("/")
        by_dir.setdefault(parent, []).append((path, name, leaf))
    try:
        for parent, entries in by_dir.items():
            fd = nofollow.open_dir(root, parent)
            if fd is None:
                return False
            try:
                for path, name, leaf in entries:
                    index[path] = (leaf.oid, os.stat(name, dir_fd=fd, follow_symlinks=False))
            finally:
                os.close(fd)
    except (OSError, nofollow.UnsafePath) as exc:
        log.warning("a file of the checkout's second process is missing (%s); writing them here", exc)
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """A helper: write the files listed on stdin under the worktree ``argv[0]``, saying how
    many are written after each batch."""
    from .gitstore.gitlib import open_repo, skip_hash_checks  # pygit2: only here, not for `write_log_files`'s callers

    root = Path((argv if argv is not None else sys.argv[1:])[0])
    fields = sys.stdin.buffer.read().split(b"\0")
    files = [(path.decode(), oid.decode()) for oid, path in zip(fields[0:-1:2], fields[1::2])]
    skip_hash_checks()  # this process only reads the blobs it was told of (rule 2)
    odb = open_repo(root).odb
    for i in range(0, len(files), BATCH):
        part = files[i : i + BATCH]
        durable.write_batch(root, [(path, odb.read(oid)[1]) for path, oid in part])
        print(i + len(part), flush=True)
    if not files:
        print(0, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
