"""The team's rules the verifier applies under a root (docs/design/trust.md, "Admission",
"Rotation and revocation"): admissions, rotations, revocations, and who may manage
agents and groups. Each judge records its verdict in ``out`` like the verifier's own
(rule 6 of `thrum.trust.verify`). Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .keys import decode_public
from .roster import point_of
from .signing import signature_of

if TYPE_CHECKING:
    from .verify import Candidate, Verdict, Verifier

__all__ = ["admit", "may_manage", "revoke", "rotate"]


def may_manage(v: Verifier, c: Candidate, author: str, out: Verdict) -> bool:
    """The management rule under a root (rule 6); False when the line was set aside."""
    d, roster = c.event, v.roster
    if roster.is_admin(author):
        return True
    t = d["type"]
    if t == "agent.cleanup":
        if d.get("agent_id") == author:
            return True
        v.reject(c, out, "not-authorized", f"{author} may not remove {d.get('agent_id')}: only an admin may")
        return False
    if t == "group.create":
        return True
    group = d.get("group") if t.startswith("group.member.") else d.get("name")
    if roster.may_manage_group(str(group), author):
        return True
    v.wait(
        c,
        out,
        "not-authorized",
        f"group:{group}",
        f"{author} may not change group {group}: only an admin or the group's creator may",
    )
    return False


def admit(v: Verifier, c: Candidate, out: Verdict) -> None:
    d = c.event
    by = str(d.get("by"))
    found = signature_of(d)
    if found is None or found[0] != by:
        return v.reject(c, out, "forged" if found else "unsigned", f"agent.admit not signed by {by}")
    admin = v.roster.admin_key(by)
    if admin is None:
        if not v.roster.governed:  # means nothing without a root; judged again when one comes
            out.accepted.append((c.shard, d))
            return None
        return v.reject(c, out, "not-authorized", f"{by} admits {d.get('agent_id')} but is not an admin")
    if not v.verify_line(c, admin, out):
        return v.reject(c, out, "bad-signature", f"agent.admit by {by} does not verify")
    try:
        v.roster.learn_admit(d)
    except ValueError as exc:
        return v.reject(c, out, "bad-key", f"agent.admit of {d.get('agent_id')}: {exc}")
    out.unblocked.append(f"admit:{d.get('agent_id')}")
    out.facts.append(c.line)
    out.accepted.append((c.shard, d))
    return None


def rotate(v: Verifier, c: Candidate, out: Verdict) -> None:
    d = c.event
    agent = str(d.get("agent_id"))
    found = signature_of(d)
    if found is None or found[0] != agent:
        return v.reject(c, out, "forged" if found else "unsigned", f"agent.rotate of {agent} not signed by it")
    try:
        old, new = decode_public(d.get("old_key")), decode_public(d.get("public_key"))
    except ValueError as exc:
        return v.reject(c, out, "bad-key", f"agent.rotate of {agent}: {exc}")
    if old not in v.roster.keys(agent):
        out.pending.append(c)  # the old key is not known yet
        return None
    if not v.verify_line(c, old, out):
        return v.reject(c, out, "bad-signature", f"agent.rotate of {agent} is not signed by its old key")
    eid = str(d.get("event_id"))
    retired = v.roster.retired(agent, old, eid)
    if retired is not None:
        return v.reject(c, out, "revoked", f"agent.rotate of {agent} signed with a key {retired.why}")
    r = v.roster.learn_rotation(agent, old, new, eid)
    if r is not None:
        out.retired.append(r)
    out.unblocked.append(agent)
    out.facts.append(c.line)
    out.accepted.append((c.shard, d))
    return None


def revoke(v: Verifier, c: Candidate, out: Verdict) -> None:
    d = c.event
    agent, by = str(d.get("agent_id")), str(d.get("by"))
    found = signature_of(d)
    if found is None or found[0] != by:
        return v.reject(c, out, "forged" if found else "unsigned", f"agent.revoke not signed by {by}")
    try:
        key = decode_public(d.get("public_key"))
    except ValueError as exc:
        return v.reject(c, out, "bad-key", f"agent.revoke of {agent}: {exc}")
    point = point_of(d)
    if point is None:
        return v.reject(c, out, "invalid", f"agent.revoke of {agent} names no point")
    admin = v.roster.admin_key(by)
    if admin is not None:
        signer_key = admin
    elif by == agent:
        if key not in v.roster.keys(agent):
            out.pending.append(c)
            return None
        signer_key = key  # the key revokes itself
    else:
        return v.reject(c, out, "not-authorized", f"{by} may not revoke {agent}'s key: only an admin or the key itself")
    if not v.verify_line(c, signer_key, out):
        return v.reject(c, out, "bad-signature", f"agent.revoke by {by} does not verify")
    r = v.roster.learn_revocation(agent, key, point, by)
    if r is not None:
        out.retired.append(r)
    out.facts.append(c.line)
    out.accepted.append((c.shard, d))
    return None
