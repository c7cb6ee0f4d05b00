"""Retries that never duplicate: one write per (agent, idempotency key).

`message.send` and `message.edit` take an optional ``idempotency_key`` (every
front end sends one through `thrum.client`). Rules:

1. The key is stored in the event, so the log remembers it as long as it keeps
   the event: across restarts, rebuilds and replicas (`thrum.store.idempotency`
   indexes it). A retry is recognised whenever it comes, which covers any client
   timeout.
2. A keyed write first looks for its key: among the writes in flight in this
   daemon (a retry that arrives while the first attempt still waits, say behind a
   sync, waits for that attempt and gets its result), among the results of this
   process (which covers a view that is behind), then in the projection. Found:
   the first result is returned and nothing is written.
3. The same key with different content is refused (-32003 Conflict): that is a
   client reusing a key, not a retry.
4. A first attempt that stored nothing (it failed before the log took it) leaves
   no trace: its retry writes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Awaitable, Callable

import trio

from .. import errors

RECENT = 4096  # results kept in memory (the projection remembers every key; this covers a lagging view)

Lookup = Callable[[], Awaitable[dict[str, Any] | None]]
Write = Callable[[], Awaitable[dict[str, Any]]]


class KeyedWrites:
    def __init__(self) -> None:
        self._in_flight: dict[tuple[str, str], trio.Event] = {}
        self._recent: OrderedDict[tuple[str, str], tuple[str, dict[str, Any]]] = OrderedDict()
        self.replayed = 0

    async def once(
        self, agent: str, key: str, digest: str, *, lookup: Lookup, write: Write, what: str = "message"
    ) -> dict[str, Any]:
        """``write()``'s result, or the first result of this key (``lookup()`` finds it in the projection).

        ``lookup`` returns ``{"digest": ..., "result": {...}}`` or None.

        Raises:
            Conflict: the key was used before for different content.
        """
        ident = (agent, key)
        while True:
            hit = self._recent.get(ident)
            if hit is not None:
                return self._replay(hit[0], digest, hit[1], key, what)
            running = self._in_flight.get(ident)
            if running is None:
                break
            await running.wait()  # the first attempt is still going: its outcome decides
        done = trio.Event()
        self._in_flight[ident] = done
        try:
            found = await lookup()
            if found is not None:
                self._remember(ident, found["digest"], found["result"])
                return self._replay(found["digest"], digest, found["result"], key, what)
            result = await write()
            self._remember(ident, digest, result)
            return result
        finally:
            del self._in_flight[ident]
            done.set()

    def _replay(self, first_digest: str, digest: str, result: dict[str, Any], key: str, what: str) -> dict[str, Any]:
        if first_digest != digest:
            raise errors.Conflict(
                f"idempotency_key {key[:60]!r} was already used for a different {what}; use a new key for a new write",
                data={"idempotency_key": key},
            )
        self.replayed += 1
        return dict(result)

    def _remember(self, ident: tuple[str, str], digest: str, result: dict[str, Any]) -> None:
        self._recent[ident] = (digest, dict(result))
        self._recent.move_to_end(ident)
        while len(self._recent) > RECENT:
            self._recent.popitem(last=False)


def key_param(params: Any) -> str | None:
    """The request's ``idempotency_key`` (validated), or None."""
    from ..events.ids import IDEMPOTENCY_KEY_RE

    key: str | None = params.str("idempotency_key", max_len=128)
    if key is None or key == "":
        return None
    if not IDEMPOTENCY_KEY_RE.fullmatch(key):
        raise errors.ValidationError(
            "invalid params: idempotency_key must be 1-128 letters, digits or . _ : -", field="idempotency_key"
        )
    return key
