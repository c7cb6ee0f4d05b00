"""The fields of the team events (issue 25; docs/design/trust.md, "Admission", "Rotation"):
an admission, a rotation, a revocation, and the invite a registration redeems.

Normalisers like the others of `thrum.events.validation`, which lists them.
"""

from __future__ import annotations

from .fields import Raw, agent_field, fail, str_field
from .ids import ULID_RE, is_valid_timestamp

__all__ = ["invite_field", "n_agent_admit", "n_agent_revoke", "n_agent_rotate"]


def invite_field(d: Raw) -> Raw:
    """An invite code redeemed by a registration (docs/design/trust.md, "Admission")."""
    invite = d.get("invite")
    if invite is None:
        return {}
    if not isinstance(invite, dict) or set(invite) != {"key", "sig"}:
        fail("invite", "must be an object with key and sig")
    return {"invite": {"key": str_field(invite, "key", max_len=64), "sig": str_field(invite, "sig", max_len=128)}}


def n_agent_admit(d: Raw) -> Raw:
    out = {"agent_id": agent_field(d), "by": agent_field(d, "by")}
    key = str_field(d, "public_key", required=False, max_len=64)
    invite = str_field(d, "invite", required=False, max_len=64)
    if bool(key) == bool(invite):
        fail("public_key", "an admission names exactly one of public_key and invite")
    out["public_key" if key else "invite"] = key or invite
    return out


def n_agent_rotate(d: Raw) -> Raw:
    return {
        "agent_id": agent_field(d),
        "public_key": str_field(d, "public_key", max_len=64),
        "old_key": str_field(d, "old_key", max_len=64),
    }


def n_agent_revoke(d: Raw) -> Raw:
    out = {
        "agent_id": agent_field(d),
        "by": agent_field(d, "by"),
        "public_key": str_field(d, "public_key", max_len=64),
        "reason": str_field(d, "reason", required=False, max_len=1024),
    }
    since = d.get("since")
    from_event = d.get("from_event")
    if (since is None) == (from_event is None):
        fail("since", "a revocation names exactly one of since and from_event")
    if since is not None:
        if not isinstance(since, str) or not is_valid_timestamp(since):
            fail("since", "must be an RFC 3339 UTC time")
        out["since"] = since
    else:
        if not isinstance(from_event, str) or not ULID_RE.fullmatch(from_event):
            fail("from_event", "must be an event id")
        out["from_event"] = from_event
    return out
