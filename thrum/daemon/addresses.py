"""Resolving ``to``/``mentions`` addresses, with a cache and one fetch from the remote.

Rules:

1. Resolved address lists are cached; agent and group events clear the cache
   (`AddressBook.on_applied`, a writer subscriber).
2. In a team on several machines an address is often unknown only because its
   agent registered elsewhere after our last sync. So when a remote is configured
   and an address is unknown (or would be a role nobody holds yet), the sync loop
   fetches and merges once (`SyncLoop.refresh`, bounded by `REFRESH_WAIT` seconds)
   and the addresses are resolved again before deciding. Still unknown, the error
   says when the last sync with the remote succeeded (and what failed since, if
   anything).
3. An address that names nothing known and is no slip for a known one is a role
   nobody holds yet: accepted, marked ``pending`` (the message waits for the
   role's first holder). With a remote, such a result is cached only after the
   fetch, so it costs one fetch per address list until an agent or group event
   clears the cache.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import trio

from .. import errors
from ..paths import ThrumPaths
from ..store import addresses as store_addresses
from ..sync import state as sync_record

if TYPE_CHECKING:
    from .syncer import SyncLoop

REFRESH_WAIT = 4.0  # seconds a send waits for a fetch before refusing an unknown address
MAX_CACHED = 4096


def _ago(stamp: str, now: datetime | None = None) -> str:
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return stamp
    secs = max(0, int(((now or datetime.now(timezone.utc)) - then).total_seconds()))
    if secs < 60:
        return f"{stamp} ({secs}s ago)"
    if secs < 3600:
        return f"{stamp} ({secs // 60}m ago)"
    if secs < 86400:
        return f"{stamp} ({secs // 3600}h ago)"
    return f"{stamp} ({secs // 86400}d ago)"


def sync_note(state: dict[str, Any], *, finished: bool) -> tuple[str, dict[str, Any]]:
    """The clause an unknown-recipient error gets after a refresh, and its data."""
    last_ok = state.get("last_success") or ""
    parts = ["checked the remote just now" if finished else "a fetch from the remote is still running"]
    parts.append(f"last successful sync: {_ago(last_ok) if last_ok else 'never'}")
    err_at = state.get("last_error_at") or ""
    if state.get("last_error") and err_at and err_at >= last_ok:
        parts.append(f"last sync error: {state['last_error']}")
    return "; ".join(parts), {"last_sync": last_ok or None, "sync_checked": finished}


class AddressBook:
    def __init__(self, read: Callable[..., Awaitable[Any]], sync: SyncLoop, paths: ThrumPaths):
        """``read``: the writer's queries; ``sync``: fetches once for an unknown address (rule
        2); ``paths``: where the last sync's record is (for the error's note)."""
        self._read = read
        self._sync = sync
        self._paths = paths
        self._cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}

    def clear(self) -> None:
        self._cache.clear()

    async def on_applied(self, applied: list[dict[str, Any]], source: str) -> None:
        """Writer subscriber: agent and group events change what an address names (rule 1)."""
        if any(d["type"].startswith(("agent.register", "agent.cleanup", "group.")) for d in applied):
            self.clear()

    async def _lookup(self, addresses: list[str], *, settled: bool = True) -> list[dict[str, Any]]:
        """Resolved addresses; a result with a pending role is cached only once ``settled``
        (no remote to ask, or asked already)."""
        key = tuple(addresses)
        hit = self._cache.get(key)
        if hit is not None:
            return [dict(r) for r in hit]
        resolved: list[dict[str, Any]] = await self._read(
            store_addresses.resolve_recipients, addresses, pending_roles=True
        )
        if settled or not any(r.get("pending") for r in resolved):
            if len(self._cache) > MAX_CACHED:
                self._cache.clear()
            self._cache[key] = [dict(r) for r in resolved]
        return resolved

    def _remote_sync(self) -> SyncLoop | None:
        return self._sync if self._sync.mode() == "remote" else None

    async def resolve(self, addresses: list[str]) -> list[dict[str, Any]]:
        """``{address, kind, value}`` for each address, in order, each once; a role nobody
        holds yet has ``pending`` set (`store_addresses.resolve_recipients`). With a remote,
        anything not known here is looked for there first (one fetch, rule 2).

        Raises:
            UnknownRecipient: an address names no agent, role or group, even after a
                fetch from the remote (with close matches, and the last sync time).
        """
        hit = self._cache.get(tuple(addresses))
        if hit is not None and not any(r.get("pending") for r in hit):
            return [dict(r) for r in hit]  # all known: nothing to ask a remote (no look at the config per send)
        sync = self._remote_sync()
        try:
            resolved = await self._lookup(addresses, settled=sync is None)
        except errors.UnknownRecipient:
            if sync is None:
                raise
        else:
            if sync is None or not any(r.get("pending") for r in resolved):
                return resolved
        finished = await sync.refresh(REFRESH_WAIT)
        try:
            resolved = await self._lookup(addresses, settled=finished)
        except errors.UnknownRecipient as exc:
            state = await trio.to_thread.run_sync(sync_record.load_state, self._paths)
            note, extra = sync_note(state, finished=finished)
            raise errors.UnknownRecipient(f"{exc.message} ({note})", data={**(exc.data or {}), **extra}) from None
        if not finished:  # the remote may know a holder this replica has not heard of yet
            for r in resolved:
                if r.get("pending"):
                    r["unchecked"] = True
        return resolved
