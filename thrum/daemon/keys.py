"""What a service may do with keys (thrum.trust): this machine's private keys, the keys this
replica trusts, the registrations waiting for an admission, and message ids bound to a key.

Key files are read and written in worker threads (`trio.to_thread`), never on the event
loop, except the checks that only look up what is loaded (`has_key`, `trusted_key`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ..trust.keys import LocalKeys
from ..trust.ring import KeyRing

if TYPE_CHECKING:
    from ..store.verified import VerifiedFold
    from .callers import Agents
    from .signer import Signer


class Keys:
    def __init__(self, local: LocalKeys, ring: KeyRing, fold: VerifiedFold, signer: Signer, agents: Agents):
        self._local = local
        self._ring = ring
        self._fold = fold
        self._signer = signer
        self._agents = agents

    def has_key(self, agent: str) -> bool:
        """True when this machine holds ``agent``'s private key (it can act for it)."""
        return self._local.get(agent, fresh=True) is not None

    def may_sign(self, agent: str) -> bool:
        """True when this machine may sign for ``agent`` now: its key is here and not retired."""
        return self._signer.may_sign(agent)

    def trusted_key(self, agent: str) -> str | None:
        """The base64 key this replica trusts for ``agent`` (local or first seen), or None."""
        key = self._ring.key(agent)
        return key.b64 if key is not None else None

    async def ensure_key(self, agent: str) -> tuple[str, bool]:
        """(public key, created now) of ``agent``, making its key pair when it has none here."""
        local = self._local
        had = await trio.to_thread.run_sync(lambda: local.get(agent, fresh=True))
        if had is not None:
            return had[1].b64, False
        _, public = await trio.to_thread.run_sync(local.create, agent)
        return public.b64, True

    def local_agents(self) -> list[str]:
        """Names whose private key is on this machine."""
        return self._local.names()

    def waiting_keys(self, name: str) -> list[str]:
        """Keys of registrations of ``name`` waiting for an admission here."""
        return self._fold.waiting_keys(name)

    async def rotate_local_key(self, name: str, private: Any) -> str:
        """Put ``private`` in place of ``name``'s key (the old file kept beside it); its base64 public key."""
        from ..trust.keys import rotate_file

        _, new, _ = await trio.to_thread.run_sync(rotate_file, self._local, name, private)
        return new.b64

    async def name_conflicts(self) -> list[dict[str, Any]]:
        """Agent names this replica has seen registered with two keys (`thrum.trust.conflicts`)."""
        from ..trust.conflicts import report

        found = await trio.to_thread.run_sync(self._ring.conflicts)
        here = {}
        for name, entry in found.items():
            if entry["local"] and entry["keys"]:
                info = await self._agents.get(name)
                if info is not None:
                    here[name] = info.get("registered_at") or ""
        return report(found, here)

    def new_message_id(self, agent: str) -> str:
        """A message id bound to ``agent``'s key (docs/design/trust.md)."""
        return self._signer.new_message_id(agent)
