"""What a ``thrum sync`` passes along to the daemon: an ssh-agent socket is used only while it lives.

``thrum sync`` sends the login variables of its shell with ``sync.run``
(`thrum.config.FORWARDED_ENV`); they serve that one cycle and are never kept
(docs/design/remotes.md). No pygit2, no trio.
"""

from __future__ import annotations

import os
import stat

__all__ = ["is_socket"]


def is_socket(path: str) -> bool:
    """True when ``path`` is a Unix socket (an ssh-agent that is still there)."""
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False
