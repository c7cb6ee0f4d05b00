"""A daemon whose checkout is deleted under it exits (issue 30, item 11): with its repository
gone it serves no one, and it would hold its files open for ever."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import trio

POLL_S = 5.0


def checkout_exists(repo: Path) -> bool:
    return repo.is_dir() and (repo / ".git").exists()


async def watch_checkout(repo: Path, gone: Callable[[], None], poll_s: float = POLL_S) -> None:
    """Call ``gone`` once the checkout at ``repo`` no longer exists (looked at every ``poll_s``)."""
    while True:
        await trio.sleep(poll_s)
        if not await trio.to_thread.run_sync(checkout_exists, repo):
            gone()
            return
