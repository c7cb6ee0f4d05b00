"""The team facts a replica has judged (admissions, rotations, revocations, group creators), kept
across restarts (docs/design/trust.md, "Admission").

The verifier learns these facts from lines as they arrive; a daemon that starts again
must know them before it judges anything new, and a catch-up reads only what is new.
So the lines that carried them are appended here (`.thrum/var/team-facts.jsonl`) and
judged again at start-up (`VerifiedFold.prime`): the file is a cache of the log, never
an authority (a line planted in it is judged like any other, and losing it costs a
rebuild's worth of learning, which the log gives back). Bounded: 16 MiB.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from ..trust.verdicts import digest

log = logging.getLogger(__name__)

__all__ = ["FactFile"]

MAX_BYTES = 16 * 1024 * 1024


class FactFile:
    def __init__(self, path: os.PathLike[str] | str | None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._seen: set[bytes] | None = None
        self._size = 0

    def lines(self) -> list[bytes]:
        if self.path is None:
            return []
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return []
        except OSError as exc:
            log.warning("cannot read %s (%s): team facts are learned again from the log", self.path, exc)
            return []
        return [line for line in data.splitlines() if line.strip()]

    def reread(self) -> None:
        """Another process of this replica appended to the file (`judge_process`): what is
        in it is read again before the next `add`, which would otherwise repeat lines."""
        with self._lock:
            self._seen = None

    def add(self, lines: list[bytes]) -> None:
        if self.path is None:
            return
        with self._lock:
            if self._seen is None:
                known = self.lines()
                self._seen = {digest(line) for line in known}
                self._size = sum(len(line) + 1 for line in known)
            fresh = []
            for line in lines:
                d = digest(line)
                if d not in self._seen and self._size + len(line) + 1 <= MAX_BYTES:
                    self._seen.add(d)
                    self._size += len(line) + 1
                    fresh.append(line.rstrip(b"\n") + b"\n")
            if not fresh:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                os.write(fd, b"".join(fresh))
            finally:
                os.close(fd)
