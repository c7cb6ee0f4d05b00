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
4. Name conflicts are remembered too (issue 30, item 4): every refused registration's
   key, per name, and how many of the name's lines received from the remote were
   refused, and when the last one arrived (`note_received`). While a local identity
   holds the name, the first other key seen is still remembered as the first
   remote key: trusted once the local identity is gone (the machine gave the name up).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from ..events.ids import now_rfc3339
from .keys import LocalKeys, PublicKey, decode_public

log = logging.getLogger(__name__)

__all__ = ["KeyRing"]


class KeyRing:
    """Name → trusted public key. Thread-safe; `learn` persists new keys."""

    def __init__(self, known_path: os.PathLike[str] | str | None = None, local: LocalKeys | None = None):
        self.path = Path(known_path) if known_path is not None else None
        self.local = local
        self._lock = threading.Lock()
        self._known: dict[str, PublicKey] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._conflicts: dict[str, dict[str, Any]] = {}  # name -> {"keys": {b64: {...}}, "lines", "last_received_at"}
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
        self._take(data)

    def _take(self, data: Any) -> None:
        entries = data.get("keys") if isinstance(data, dict) else None
        conflicts = data.get("conflicts") if isinstance(data, dict) else None
        if isinstance(conflicts, dict):
            self._conflicts = {
                n: c for n, c in conflicts.items() if isinstance(c, dict) and isinstance(c.get("keys"), dict)
            }
        for name, entry in (entries or {}).items():
            if name in self._known:
                continue  # trusted on first use: never replaced (rule 2)
            try:
                self._known[name] = decode_public(entry.get("key"))
                self._meta[name] = entry
            except (AttributeError, ValueError):
                log.warning("ignoring a malformed entry for %r in %s", name, self.path)

    def reload(self) -> bool:
        """Learn what another process of this replica wrote to the file since it was read
        (a rebuild's trust check judged in a second process: `thrum.store.judge_process`):
        its new keys join these (none is replaced) and its conflicts, a superset of these,
        replace them. False when the file cannot be read (nothing changes); no file: that
        process learned nothing to write (the local identities' keys are not written)."""
        if self.path is None:
            return False
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return True
        except (OSError, ValueError) as exc:
            log.warning("cannot read %s again (%s)", self.path, exc)
            return False
        with self._lock:
            self._take(data)
        return True

    def key(self, name: str) -> PublicKey | None:
        """The key ``name`` is trusted with, or None when this replica knows none."""
        if self.local is not None:
            pair = self.local.get(name)
            if pair is not None:
                return pair[1]
        return self._known.get(name)

    def known_key(self, name: str) -> PublicKey | None:
        """The key learned from the log for ``name`` (first use), local identities aside."""
        return self._known.get(name)

    def is_local(self, name: str) -> bool:
        return self.local is not None and self.local.get(name) is not None

    def learn(self, name: str, key: PublicKey, event_id: str = "", registered_at: str = "") -> str:
        """``"new"`` (now trusted), ``"same"`` (already trusted) or ``"conflict"`` (remembered, rule 4)."""
        with self._lock:
            current = self.key(name)
            if current is not None:
                if current == key:
                    return "same"
                self._conflict(name, key, event_id, registered_at)
                return "conflict"
            self._known[name] = key
            self._meta[name] = {"key": key.b64, "learned_at": now_rfc3339(), "event_id": event_id}
            self._dirty = True
            return "new"

    def _conflict(self, name: str, key: PublicKey, event_id: str, registered_at: str) -> None:
        keys = self._conflicts.setdefault(name, {"keys": {}})["keys"]
        changed = False
        if key.b64 not in keys:
            keys[key.b64] = {
                "event_id": event_id,
                "registered_at": registered_at,
                "seen_at": now_rfc3339(),
                "lines": 0,
                "last_received_at": "",
            }
            changed = True
        if name not in self._known and self.is_local(name):
            self._known[name] = key  # the first remote key: trusted if the local identity goes
            self._meta[name] = {"key": key.b64, "learned_at": now_rfc3339(), "event_id": event_id}
            changed = True
        if changed:
            self._dirty = True  # written by the verifier's `flush` after the batch

    def conflict_keys(self, name: str) -> dict[str, PublicKey]:
        """The refused keys of ``name`` (base64 → key), to tell which of them signed a line."""
        with self._lock:
            found = list((self._conflicts.get(name) or {}).get("keys") or {})
        out = {}
        for b64 in found:
            try:
                out[b64] = decode_public(b64)
            except ValueError:
                continue
        return out

    def note_received(self, counts: dict[str, dict[str, int]]) -> None:
        """Lines a sync received and refused, by name and by the refused key that signed them."""
        with self._lock:
            at, touched = now_rfc3339(), False
            for name, by_key in counts.items():
                keys = (self._conflicts.get(name) or {}).get("keys") or {}
                for b64, n in by_key.items():
                    entry = keys.get(b64)
                    if entry is not None and n > 0:
                        entry["lines"] = int(entry.get("lines") or 0) + n
                        entry["last_received_at"] = at
                        touched = True
            if touched:
                self._save()

    def conflicted(self) -> set[str]:
        with self._lock:
            return set(self._conflicts)

    def conflicts(self) -> dict[str, dict[str, Any]]:
        """Name → ``{"keys": {b64: {event_id, registered_at, seen_at, lines, last_received_at}},
        "trusted", "local"}``: the refused keys (a key this replica trusts now is not one),
        the key it trusts, and whether a local identity holds the name."""
        with self._lock:
            items = {name: json.loads(json.dumps(entry)) for name, entry in self._conflicts.items()}
        out = {}
        for name, entry in items.items():
            trusted = self.key(name)
            keys = {k: v for k, v in entry["keys"].items() if trusted is None or k != trusted.b64}
            out[name] = {
                "keys": keys,
                "trusted": trusted.b64 if trusted is not None else None,
                "local": self.is_local(name),
            }
        return out

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
        data = json.dumps({"version": 1, "keys": self._meta, "conflicts": self._conflicts}, indent=1, sort_keys=True)
        with open(tmp, "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
