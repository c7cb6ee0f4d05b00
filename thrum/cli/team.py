"""``thrum team init|show``: the team's trust root (docs/design/trust.md, "The team root")."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ..errors import ThrumError
from .common import CONTEXT_SETTINGS, global_options, runtime


@click.group(context_settings=CONTEXT_SETTINGS)
@global_options()
def team() -> None:
    """The team's trust root: who administers the team, which log is its own, who may join.

    \b
    The root is thrum-team.toml at the top of the repository. It counts once it is
    committed on the project's normal branch (the remote's HEAD, else main/master),
    so it changes through ordinary commits and review. Without it, thrum trusts each
    agent's first registration it sees (trust on first use).

    \b
    Examples:
      thrum team init                 # write thrum-team.toml; then commit and push it
      thrum team show
    """


@team.command("init", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--policy",
    type=click.Choice(["admins", "open"]),
    default="admins",
    show_default=True,
    help="admins: only agents an admin admits may register; open: anyone may (trust on first use).",
)
@click.option(
    "--admin",
    "admins",
    multiple=True,
    metavar="NAME",
    help="Make only these local identities admins (repeatable; default: every identity with a key here).",
)
@click.option("--force", is_flag=True, help="Replace an existing thrum-team.toml in the checkout.")
@global_options()
def init(policy: str, admins: tuple[str, ...], force: bool) -> None:
    """Write thrum-team.toml from this machine's identities (they become the admins).

    Agents this replica already knows (registered here or learned from the log) are
    listed as members, so a team that adopts a root keeps every agent it has. Review
    the file, then commit it on the normal branch and push it like any file.
    """
    from ..trust.keys import LocalKeys, decode_public
    from ..trust.ring import KeyRing
    from ..trust.teamroot import FILE_NAME, TeamRoot, new_log_id, render_team_root

    rt = runtime()
    paths = rt.require_init()
    target = paths.repo / FILE_NAME
    if os.path.lexists(target) and not force:
        raise ThrumError(f"{target} exists; edit it, or pass --force to write a new one")
    local = LocalKeys(paths.identities)
    names = list(admins) or local.names()
    chosen = {}
    for name in names:
        pair = local.require(name)
        if pair is None:
            raise ThrumError(f"agent {name!r} has no key on this machine, so it cannot be an admin here")
        chosen[name] = pair[1]
    if not chosen:
        raise ThrumError("no identity with a key on this machine: register one first (thrum quickstart)")
    members = {name: decode_public(text) for name, text in KeyRing(paths.var / "known_keys.json").known().items()}
    for name in local.names():
        pair = local.get(name)
        if pair is not None:
            members[name] = pair[1]
    members = {n: k for n, k in members.items() if n not in chosen}
    root = TeamRoot(log_id=new_log_id(), policy=policy, admins=chosen, members=members)
    _write(target, render_team_root(root))
    result = {"path": str(target), **root.to_json()}
    rt.emit(
        result,
        lambda: (
            f"> Wrote {target} (policy {policy}; admins: {', '.join(sorted(chosen))}"
            + (f"; members: {', '.join(sorted(members))}" if members else "")
            + ")\n"
            + f"  It counts once committed on the normal branch: git add {FILE_NAME} && "
            + 'git commit -m "thrum team root" && git push'
        ),
    )


@team.command("show", context_settings=CONTEXT_SETTINGS)
@global_options()
def show() -> None:
    """Print the trust root this replica uses, and where its view comes from; with the
    daemon running, also the keys rotated and revoked (and admissions) it has seen."""
    from .. import lifecycle
    from ..sync.offline import team_root

    rt = runtime()
    paths = rt.require_init()
    result = team_root(paths)
    if lifecycle.is_running(paths):
        live = rt.call("team.status", {}, autostart=False)
        result["retired"] = live.get("retired", [])
        result["rotations"] = live.get("rotations", {})
        result["admitted"] = live.get("admitted", {})
    rt.emit(result, lambda: _show_text(result))


def _show_text(r: dict[str, Any]) -> str:
    root = r.get("root")
    lines = [f"Source:   {r['source']}"]
    if r.get("error"):
        lines.append(f"Error:    {r['error']} (trust on first use until it is fixed)")
    if root is None:
        lines.append("Trust:    trust on first use (no team root: each agent's first registration is trusted)")
    else:
        lines.append(f"Log id:   {root['log_id']}")
        lines.append(f"Policy:   {root['policy']}")
        lines.append("Admins:   " + ", ".join(f"{n} ({k[:12]}…)" for n, k in root["admins"].items()))
        members = {n: k for n, k in root["members"].items() if n not in root["admins"]}
        if members:
            lines.append("Members:  " + ", ".join(f"{n} ({k[:12]}…)" for n, k in members.items()))
    for item in r.get("retired") or []:
        lines.append(f"Retired:  {item['name']} key {item['key'][:12]}… — {item['why']}")
    if r.get("checkout_differs"):
        lines.append(
            "Note:     the thrum-team.toml in this checkout differs from the committed one; "
            "it counts only once committed on the normal branch"
        )
    return "\n".join(lines)


def _write(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)


@team.command("admit", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option("--key", default="", metavar="KEY", help="The agent's public key (default: its waiting registration's).")
@global_options()
def admit(name: str, key: str) -> None:
    """Admit agent NAME (as an admin of the team root): its registration counts on every replica.

    Without --key, the key of the registration of NAME this replica holds back
    (quarantined as not-admitted) is admitted. Re-admitting a name with a new key is
    how a lost key is replaced (revoke the old one too).
    """
    rt = runtime()
    params = {"name": name.lstrip("@")}
    if key:
        params["key"] = key
    result = rt.agent_call("team.admit", params)
    rt.emit(result, f"> @{result['agent_id']} admitted with key {result['public_key'][:12]}… by @{result['by']}")


@team.command("invite", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@global_options()
def invite(name: str) -> None:
    """Invite agent NAME (as an admin): prints a code the new agent redeems with
    `thrum quickstart --name NAME --role ROLE --invite CODE`. Anyone holding the code can
    redeem it: pass it privately."""
    rt = runtime()
    result = rt.agent_call("team.invite", {"name": name.lstrip("@")})
    rt.emit(
        result,
        f"> Invite for @{result['agent_id']}: {result['code']}\n"
        f"  Redeem: thrum quickstart --name {result['agent_id']} --role ROLE --invite {result['code']}",
    )


@team.command("revoke", context_settings=CONTEXT_SETTINGS)
@click.argument("name")
@click.option(
    "--since",
    default="",
    metavar="TIME",
    help="Revoke lines dated from TIME on (RFC 3339, e.g. 2026-11-27T10:00:00Z, or now).",
)
@click.option("--from", "from_event", default="", metavar="EVENT", help="Revoke from this event id on (it included).")
@click.option("--key", default="", metavar="KEY", help="The key to revoke (default: the key known for NAME).")
@global_options()
def revoke(name: str, since: str, from_event: str, key: str) -> None:
    """Revoke NAME's key from a point on: lines signed with it after that point are
    quarantined (revoked) on every replica, whenever they arrive; earlier ones stay.
    Signed by an admin, or by NAME itself with that key (--name NAME)."""
    if bool(since) == bool(from_event):
        raise click.UsageError("give exactly one of --since TIME and --from EVENT")
    rt = runtime()
    params = {"name": name.lstrip("@"), "since": since, "from_event": from_event}
    if key:
        params["key"] = key
    result = rt.agent_call("team.revoke", params)
    point = f"since {result['since']}" if result.get("since") else f"from event {result['from_event']}"
    rt.emit(result, f"> @{result['agent_id']}'s key {result['public_key'][:12]}… revoked {point} by @{result['by']}")
