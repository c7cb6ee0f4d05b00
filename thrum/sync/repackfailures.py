"""The repacks that failed, kept where ``thrum doctor`` reads them.

A failed repack never fails a sync (`maintenance`), and the daemon's tidy task and an
offline sync's detached child (`fullrepack`) only log it: a store whose repacks keep
failing (a full disk, a damaged pack, a git that refuses) grows by a pack of whole
objects per sync until someone reads a log. So each failure is noted per store beside
the full repacks' record (``thrum-sync/`` of our common dir), a repack of that store that
works removes the note, and ``thrum doctor`` warns while one is there
(`diagnose.maintenance_check`). Written by us, read as untrusted all the same.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["FILE", "clear", "noted", "note"]

FILE = "repack-failures.json"
MAX_WHY = 300  # characters of git's last line kept

log = logging.getLogger(__name__)


def noted(record_dir: Path) -> dict[str, dict[str, Any]]:
    """The failures noted: objects directory -> ``{"why": str, "at": seconds since the epoch}``."""
    try:
        data = json.loads((record_dir / FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: {"why": v["why"], "at": v["at"]}
        for k, v in data.items()
        if isinstance(k, str)
        and isinstance(v, dict)
        and isinstance(v.get("why"), str)
        and isinstance(v.get("at"), (int, float))
    }


def note(record_dir: Path, objects: Path, why: str) -> None:
    failures = noted(record_dir)
    failures[str(objects)] = {"why": why[:MAX_WHY], "at": round(time.time(), 3)}
    _write(record_dir, failures)


def clear(record_dir: Path, objects: Path) -> None:
    """After a repack of ``objects`` that worked (one look at a file that is usually missing)."""
    if not (record_dir / FILE).exists():
        return
    failures = noted(record_dir)
    if failures.pop(str(objects), None) is not None:
        _write(record_dir, failures)


def _write(record_dir: Path, failures: dict[str, dict[str, Any]]) -> None:
    path = record_dir / FILE
    tmp = path.with_name(f".{FILE}.{os.getpid()}.tmp")
    try:
        if not failures:
            path.unlink(missing_ok=True)
            return
        record_dir.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(failures, sort_keys=True))
        os.replace(tmp, path)
    except OSError as exc:  # the log line stays; doctor just cannot say it
        log.warning("cannot note the repack failures in %s: %s", path, exc)
