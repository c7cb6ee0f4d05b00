"""Writing benchmark histories straight into a worktree, in the log's layout.

The benchmarks generate millions of lines without the daemon; this appends them the
way `thrum.store.log.EventLog` does: to the highest segment of each stream until it
reaches the cap, then to the next one (``{stream}/{n:06d}.jsonl``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from thrum import events as ev  # noqa: E402
from thrum.store.log import SEGMENT_CAP  # noqa: E402


class SegmentWriter:
    """Appends raw lines (each ending with a newline) to streams under ``root``."""

    def __init__(self, root: Path, cap: int = SEGMENT_CAP):
        self.root = Path(root)
        self.cap = cap
        self._tails: dict[str, list] = {}  # stream -> [number, size, open file or None]

    def _tail(self, stream: str) -> list:
        tail = self._tails.get(stream)
        if tail is None:
            folder = self.root / stream
            numbers = [ev.segment_number(n) for n in os.listdir(folder)] if folder.is_dir() else []
            n = max((x for x in numbers if x is not None), default=1)
            path = self.root / ev.segment_path(stream, n)
            tail = self._tails[stream] = [n, path.stat().st_size if path.exists() else 0, None]
        return tail

    def append(self, stream: str, lines: list[bytes]) -> None:
        tail = self._tail(stream)
        chunk: list[bytes] = []
        for line in lines:
            if tail[1] and tail[1] + len(line) > self.cap:
                self._write(stream, tail, chunk)
                chunk = []
                tail[0], tail[1] = tail[0] + 1, 0
                if tail[2] is not None:
                    tail[2].close()
                    tail[2] = None
            chunk.append(line)
            tail[1] += len(line)
        self._write(stream, tail, chunk)

    def _write(self, stream: str, tail: list, chunk: list[bytes]) -> None:
        if not chunk:
            return
        if tail[2] is None:
            path = self.root / ev.segment_path(stream, tail[0])
            path.parent.mkdir(parents=True, exist_ok=True)
            tail[2] = open(path, "ab")
        tail[2].write(b"".join(chunk))

    def close(self) -> None:
        for tail in self._tails.values():
            if tail[2] is not None:
                tail[2].close()
                tail[2] = None

    def __enter__(self) -> "SegmentWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
