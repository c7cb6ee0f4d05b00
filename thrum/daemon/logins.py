"""Which login a sync cycle uses (docs/design/remotes.md).

Logins are looked up for each cycle: the config, the daemon's own environment, and
what the ``thrum sync`` that asked for this cycle passed along (`thrum.config.FORWARDED_ENV`,
only from the local user's CLI: `thrum.daemon.peer`). What a caller passed serves that
one cycle and is never kept: the sync loop hands each cycle's login to its fetches and
pushes (`thrum.sync.cycle.run_cycle`), and the automatic cycles log in with the daemon's
own environment and config, as do the looks at the remote's tip between cycles. ``sync
status`` still says which login the last cycle used (`Logins.last_used`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..config import Config

if TYPE_CHECKING:
    from ..sync.transport.credentials import Credentials


class Logins:
    def __init__(self, config: Config):
        self._config = config
        self._looks = self.for_cycle()  # the looks between cycles log in as the last own cycle did
        self.last_used: str | None = None  # which login the last cycle used (``sync status``)

    def for_cycle(self, env: dict[str, str] | None = None) -> Credentials:
        """The logins of one cycle; ``env``: what the asking ``thrum sync`` passed along."""
        from ..sync.transport.credentials import credentials_from_env

        return credentials_from_env(self._config.values, forwarded=env, own="the daemon's environment")

    def cycle_ended(self, login: Credentials, env: dict[str, str] | None) -> None:
        """The cycle that logged in with ``login`` (``env``: what its caller passed) ended:
        what a caller passed ends with it, and the looks go on with the daemon's own."""
        self.last_used = login.last_source
        self._looks = self.for_cycle() if env else login

    def for_looks(self) -> Credentials:
        """The login of a look at the remote's tip between cycles (`thrum.daemon.lookout`)."""
        return self._looks

    def callbacks(self) -> Any:
        """libgit2's callbacks for the daemon's own logins (None: local-only, no remote)."""
        from ..sync.transport.callbacks import remote_callbacks

        if self._config.local_only:
            return None
        return remote_callbacks(self.for_cycle())
