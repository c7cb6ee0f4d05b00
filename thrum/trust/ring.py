"""The keys a replica trusts: its local identities' keys, then the first key seen for each agent.

Rules:

1. Local identities win: an agent whose private key is on this machine is known by
   that key, whatever the remote claims (`LocalKeys`).
2. Trust on first use: any other agent is known by the first self-signed
   ``agent.register`` this replica accepted for it. A later registration with a
   different key is a conflict (quarantined by `verify`), never a replacement.
3. What was learned survives a rebuild of the projection: it is remembered in
   ``.thrum/var/known_keys.json`` (written atomically when it grows, once per batch
   of lines judged: `flush`), because re-learning from the log would let whoever can
   rewrite the remote's history choose the "first" key again. One write per new key
   made a push of thousands of new agents quadratic, with the writer's lock held.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from ..events.ids import now_rfc3339
from .keys import LocalKeys, PublicKey, decode_public

log = logging.getLogger(__name__)

__all__ = ["KeyRing"]


class KeyRing:
    """Name → trusted public key. Thread-safe; `learn` persists new keys."""

    def __init__(self, known_path: os.PathLike | str | None = None, local: LocalKeys | None = None):
        self.path = Path(known_path) if known_path is not None else None
        self.local = local
        self._lock = threading.Lock()
        self._known: dict[str, PublicKey] = {}
        self._meta: dict[str, dict] = {}
        self._dirty = False
        self._load()

    def _load(self) -> None:
        if self.path is None:
            return
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("cannot read %s (%s): keys will be learned again from the log", self.path, exc)
            return
        entries = data.get("keys") if isinstance(data, dict) else None
        for name, entry in (entries or {}).items():
            try:
                self._known[name] = decode_public(entry.get("key"))
                self._meta[name] = entry
            except (AttributeError, ValueError):
                log.warning("ignoring a malformed entry for %r in %s", name, self.path)

    def key(self, name: str) -> PublicKey | None:
        """The key ``name`` is trusted with, or None when this replica knows none."""
        if self.local is not None:
            pair = self.local.get(name)
            if pair is not None:
                return pair[1]
        return self._known.get(name)

    def is_local(self, name: str) -> bool:
        return self.local is not None and self.local.get(name) is not None

    def learn(self, name: str, key: PublicKey, event_id: str = "") -> str:
        """``"new"`` (now trusted), ``"same"`` (already trusted) or ``"conflict"``."""
        with self._lock:
            current = self.key(name)
            if current is not None:
                return "same" if current == key else "conflict"
            self._known[name] = key
            self._meta[name] = {"key": key.b64, "learned_at": now_rfc3339(), "event_id": event_id}
            self._dirty = True
            return "new"

    def flush(self) -> None:
        """Write what was learned since the last flush (the verifier calls this after
        each batch, before the batch is folded)."""
        with self._lock:
            if self._dirty:
                self._save()
                self._dirty = False

    def known(self) -> dict[str, str]:
        """Name → base64 key of every key learned from the log (not the local ones)."""
        return {name: k.b64 for name, k in self._known.items()}

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        data = json.dumps({"version": 1, "keys": self._meta}, indent=1, sort_keys=True)
        with open(tmp, "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
