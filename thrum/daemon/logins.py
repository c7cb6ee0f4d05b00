"""Which login a sync cycle uses (docs/design/remotes.md).

Logins are looked up for each cycle: the config, the daemon's own environment, and
what the ``thrum sync`` that asked for this cycle passed along (`thrum.config.FORWARDED_ENV`,
only from the local user's CLI: `thrum.daemon.peer`). What a caller passed serves that
one cycle and is never kept: the sync loop hands each cycle's login to its fetches and
pushes (`thrum.sync.cycle.run_cycle`), and the automatic cycles log in with the daemon's
own environment and config. ``sync status`` still says which login the last cycle used
(the sync loop's record of it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import Config

if TYPE_CHECKING:
    from ..sync.transport.credentials import Credentials


class Logins:
    def __init__(self, config: Config):
        self._config = config

    def for_cycle(self, env: dict[str, str] | None = None) -> Credentials:
        """The logins of one cycle; ``env``: what the asking ``thrum sync`` passed along."""
        from ..sync.transport.credentials import credentials_from_env

        return credentials_from_env(self._config.values, forwarded=env, own="the daemon's environment")

    def callbacks(self) -> Any:
        """libgit2's callbacks for the daemon's own logins (None: local-only, no remote)."""
        from ..sync.transport.callbacks import remote_callbacks

        if self._config.local_only:
            return None
        return remote_callbacks(self.for_cycle())
