"""Who may sign as whom, and until when: admissions, rotations, revocations and group creators.

The verifier asks the roster (docs/design/trust.md, "Admission", "Rotation and
revocation"). Rules:

1. Without a team root, a name's key is the one trust on first use learned (`KeyRing`),
   as before. With one, the root is the anchor: a name's keys are those the root lists
   (admins, members), those an admin admitted (``agent.admit``, checked against the
   root's admin keys), and those that redeemed an admin's invite. Under
   ``policy = "open"`` a name nobody admitted is still learned on first use.
2. Local identities win: the key of an identity whose private key is here is always
   one of its keys.
3. A rotation (``agent.rotate``, signed by the old key) adds the new key and retires the
   old one for every event after the rotation's id. A revocation (``agent.revoke``,
   signed by an admin, or by the revoked key itself) retires a key from a point on:
   ``from_event`` (that event and every later id) or ``since`` (every id dated from
   then). Earlier lines stay valid.
4. Every fact is a set member: the verdict on a line depends on which facts are known,
   never on the order they arrived in. When a fact arrives that retires a key, lines
   it covers that were applied before are found by the caller (`retired` lists them)
   and the view is rebuilt (`thrum.store.verified`).
5. Group creators (for the management rule) are the authors of accepted group.create
   lines; the facts are kept in memory and their lines persisted by the caller.
6. An agent that acts for a Gas City mailbox (``gcr_``/``gck_`` names) speaks as that
   mailbox (its mail shows as from the address, it keeps the mailbox's read state),
   so under a root it is never learned on first use, whatever the policy: its key is
   the root's, an admin's admission or an invite's (issue 31, finding 6). Without a
   root every name is trust on first use, these too.

Pure apart from the ring it wraps: no trio, no pygit2, no SQL.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..events.ids import ulid_prefix
from .keys import PublicKey, decode_public
from .ring import KeyRing
from .teamroot import TeamRoot

__all__ = ["PROXY_PREFIXES", "Retirement", "Roster", "is_proxy_name", "point_of"]

# Names of the agents that act for a Gas City mailbox (`thrum.gcmail.addresses`, rule 4:
# ``gcr_<tag>_…`` and its clerk ``gck_<tag>_…``): they speak as the mailbox.
PROXY_PREFIXES = ("gcr_", "gck_")


def is_proxy_name(name: str) -> bool:
    """Whether ``name`` acts for a Gas City mailbox (rule 6: never admitted on first use under a root)."""
    return name.startswith(PROXY_PREFIXES)


@dataclass(frozen=True)
class Retirement:
    """A key of ``name`` that no longer counts for event ids ``>= point``."""

    name: str
    key: str  # base64
    point: str
    why: str


def point_of(d: dict[str, Any]) -> str | None:
    """The first event id a revocation covers (``from_event``, or ``since`` as an id prefix)."""
    if d.get("from_event"):
        return str(d["from_event"])
    since = d.get("since")
    if not isinstance(since, str):
        return None
    from datetime import datetime

    try:
        ms = int(datetime.fromisoformat(since.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None
    return ulid_prefix(ms) + "0" * 16


class Roster:
    """The team's keys over time (see the module rules). Thread-safe for one writer."""

    def __init__(self, ring: KeyRing, root: TeamRoot | None = None):
        self.ring = ring
        self.root = root
        self._lock = threading.Lock()
        self._admitted: dict[str, dict[str, PublicKey]] = {}  # name -> b64 -> key (admits, redeemed invites)
        self._invites: dict[str, str] = {}  # invite key b64 -> name
        self._rotated_to: dict[str, dict[str, tuple[PublicKey, str]]] = {}  # name -> old b64 -> (new, event id)
        self._retired: dict[tuple[str, str], Retirement] = {}  # (name, b64) -> earliest retirement
        self._retired_names: set[str] = set()
        self._creators: dict[str, set[str]] = {}  # group -> its creators

    # ------------------------------------------------------------------ the root

    def set_root(self, root: TeamRoot | None) -> bool:
        """Use ``root`` from now on; True when it differs from the one in use."""
        changed = root != self.root
        self.root = root
        return changed

    @property
    def governed(self) -> bool:
        return self.root is not None

    @property
    def plain(self) -> bool:
        """No root and no key retired: a remembered verdict stands as it was (the fast path)."""
        return self.root is None and not self._retired_names

    def admin_key(self, name: str) -> PublicKey | None:
        return self.root.admins.get(name) if self.root is not None else None

    # ------------------------------------------------------------------ keys

    def keys(self, name: str) -> list[PublicKey]:
        """Every key ``name`` may have signed with (valid at some point), the likeliest first."""
        base: list[PublicKey] = []
        local = self.ring.local.get(name) if self.ring.local is not None else None
        if local is not None:
            base.append(local[1])
        admitted = self._admitted_keys(name)
        if admitted:
            base += admitted
        elif local is None and (self.root is None or (self.root.policy == "open" and not is_proxy_name(name))):
            known = self.ring.known_key(name)  # local identities win over the first remote key (ring rule 4)
            if known is not None:
                base.append(known)
        out: list[PublicKey] = []
        todo = list(base)
        while todo and len(out) < 64:  # rotations chain: old -> new -> newer
            k = todo.pop(0)
            if k in out:
                continue
            out.append(k)
            nxt = self._rotated_to.get(name, {}).get(k.b64)
            if nxt is not None:
                todo.append(nxt[0])
        out.reverse()  # the newest key signs most lines
        return out

    def _admitted_keys(self, name: str) -> list[PublicKey]:
        if self.root is None:
            return []
        out = []
        listed = self.root.admitted_key(name)
        if listed is not None:
            out.append(listed)
        out += [k for k in self._admitted.get(name, {}).values() if k not in out]
        return out

    def key(self, name: str) -> PublicKey | None:
        """One key of ``name`` (the newest), for callers that want one."""
        found = self.keys(name)
        return found[0] if found else None

    def retired(self, name: str, key: PublicKey, event_id: str) -> Retirement | None:
        """Why ``key`` does not count for ``name``'s event ``event_id`` (None: it does)."""
        r = self._retired.get((name, key.b64))
        return r if r is not None and event_id >= r.point else None

    def has_history(self, name: str) -> bool:
        """Whether any key of ``name`` was retired (a remembered verdict may not hold)."""
        return name in self._retired_names

    def retirements(self) -> list[Retirement]:
        return sorted(self._retired.values(), key=lambda r: (r.name, r.point))

    # ------------------------------------------------------------------ admission

    def admission(self, name: str, key: PublicKey, invite: dict[str, Any] | None) -> str:
        """``admitted``, ``first-use`` (learn it as before) or ``not-admitted`` for a registration."""
        if self.ring.local is not None:
            pair = self.ring.local.get(name)
            if pair is not None and pair[1] == key:
                return "admitted"
        if key in self.keys(name):
            return "admitted"
        if self.root is None:
            return "first-use"
        if invite is not None and self._redeems(name, key, invite):
            return "admitted"
        if self.root.policy == "open" and not self._admitted_keys(name) and not is_proxy_name(name):
            return "first-use"
        return "not-admitted"

    def _redeems(self, name: str, key: PublicKey, invite: dict[str, Any]) -> bool:
        from .signing import invite_proof_ok

        ikey = invite.get("key")
        if not isinstance(ikey, str) or self._invites.get(ikey) != name:
            return False
        if not invite_proof_ok(name, key, invite):
            return False
        with self._lock:
            self._admitted.setdefault(name, {})[key.b64] = key
        return True

    def learn_admit(self, d: dict[str, Any]) -> bool:
        """An admission by an admin whose signature the caller verified; True when new."""
        name = str(d.get("agent_id"))
        with self._lock:
            if d.get("invite"):
                new = d["invite"] not in self._invites
                self._invites[str(d["invite"])] = name
                return new
            key = decode_public(d.get("public_key"))
            held = self._admitted.setdefault(name, {})
            new = key.b64 not in held
            held[key.b64] = key
            return new

    def learn_rotation(self, name: str, old: PublicKey, new: PublicKey, event_id: str) -> Retirement | None:
        """The old key retires after ``event_id``; the new retirement when it is news."""
        with self._lock:
            by_old = self._rotated_to.setdefault(name, {})
            current = by_old.get(old.b64)
            if current is None or event_id < current[1]:  # two rotations of one key: the earlier counts
                by_old[old.b64] = (new, event_id)
        return self._retire(Retirement(name, old.b64, event_id + "!", f"rotated to key {new.b64[:12]}… at {event_id}"))

    def learn_revocation(self, name: str, key: PublicKey, point: str, by: str) -> Retirement | None:
        return self._retire(Retirement(name, key.b64, point, f"revoked by {by} from {point[:26]}"))

    def _retire(self, r: Retirement) -> Retirement | None:
        with self._lock:
            held = self._retired.get((r.name, r.key))
            if held is not None and held.point <= r.point:
                return None
            self._retired[(r.name, r.key)] = r
            self._retired_names.add(r.name)
            return r

    # ------------------------------------------------------------------ management

    def learn_creator(self, group: str, creator: str) -> bool:
        with self._lock:
            held = self._creators.setdefault(group, set())
            new = creator not in held
            held.add(creator)
            return new

    def may_manage_group(self, group: str, signer: str) -> bool:
        if self.root is None or signer in self.root.admins:
            return True
        return signer in self._creators.get(group, ())

    def is_admin(self, name: str) -> bool:
        return self.root is not None and name in self.root.admins

    def to_json(self) -> dict[str, Any]:
        return {
            "admitted": {n: sorted(k) for n, k in sorted(self._admitted.items())},
            "invites": len(self._invites),
            "retired": [{"name": r.name, "key": r.key, "from": r.point[:26], "why": r.why} for r in self.retirements()],
            "rotations": {
                n: {old: {"to": new.b64, "at": eid} for old, (new, eid) in m.items()}
                for n, m in sorted(self._rotated_to.items())
            },
        }
