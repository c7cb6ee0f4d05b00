"""What this replica already judged: the lines it verified (or wrote), remembered by hash.

An Ed25519 verification costs ~70 µs here; a rebuild that verified every line of a
million-line log again would take minutes. A line's verdict never changes (keys are
trusted on first use and never replaced), so it is remembered once, when the line
enters — written by this daemon, or received and verified — and a rebuild only
hashes each line and looks it up.

Rules:

1. The memory is an append-only file of 16-byte line digests
   (``.thrum/var/verified-lines``). Only lines that were accepted are in it;
   quarantined lines are judged again at every rebuild (they are few).
2. Losing it costs time, never correctness: a line it does not know is verified
   (through a seal, or on its own). It is not fsynced for the same reason.
3. It is only read in full for large folds (a rebuild, a long catch-up); small
   folds verify the few lines they carry.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import weakref
from pathlib import Path

log = logging.getLogger(__name__)

DIGEST_BYTES = 16

__all__ = ["DIGEST_BYTES", "VerdictMemory", "digest"]


def digest(line: bytes) -> bytes:
    """The 16-byte name of a line (without its newline); seals list the same digest."""
    return hashlib.sha256(line.rstrip(b"\n")).digest()[:DIGEST_BYTES]


class VerdictMemory:
    """The digests of lines already accepted, on disk and (when loaded) in memory."""

    def __init__(self, path: os.PathLike[str] | str | None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._loaded: set[bytes] | None = None
        # Kept open for appending: an open, two seeks and a close per batch were a few µs
        # of every durable send. Closed when the memory goes.
        self._fd: int | None = None

    def load(self) -> set[bytes]:
        """Read the whole memory (kept until `release`)."""
        with self._lock:
            if self._loaded is None:
                self._loaded = self._read()
            return self._loaded

    def release(self) -> None:
        with self._lock:
            self._loaded = None

    def known(self) -> set[bytes] | None:
        """The loaded set, or None when it is not loaded."""
        return self._loaded

    def remember(self, digests: list[bytes]) -> None:
        if not digests or self.path is None:
            return
        with self._lock:
            if self._loaded is not None:
                self._loaded.update(digests)
            try:
                if self._fd is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fd = fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
                    weakref.finalize(self, os.close, fd)
                data = memoryview(b"".join(digests))
                while data:
                    data = data[os.write(self._fd, data) :]
            except OSError as exc:  # costs time later, never correctness
                log.warning("cannot remember verified lines in %s: %s", self.path, exc)

    def _read(self) -> set[bytes]:
        if self.path is None:
            return set()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return set()
        except OSError as exc:
            log.warning("cannot read %s (%s): lines will be verified again", self.path, exc)
            return set()
        n = len(data) // DIGEST_BYTES
        return {data[i * DIGEST_BYTES : (i + 1) * DIGEST_BYTES] for i in range(n)}
