"""Opening the log's segment files: only the layout's own paths, never through a link.

The worktree is untrusted (its files come from the remote): every path is walked by
`thrum.nofollow`, the one walker the store and the sync share. A segment that is a
link, or sits below one, is skipped with a warning as if it were absent.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import BinaryIO

from .. import events as ev
from ..nofollow import UnsafePath, open_file

log = logging.getLogger("thrum.store.log")

__all__ = ["open_segment"]


def open_segment(root: Path, shard: str) -> BinaryIO:
    """Open a segment for reading.

    Raises:
        ValueError: not a path of the layout.
        FileNotFoundError: no such file (or a link, a FIFO or a directory in its place).
    """
    ev.parse_log_path(shard)
    try:
        f = open_file(root, shard)
    except UnsafePath:
        log.warning("ignoring %s in the log: a link or not a regular file", shard)
        f = None
    if f is None:
        raise FileNotFoundError(root / shard)
    return f
