"""doctor.run: the checks of ``thrum doctor`` that need the daemon.

Git side (worktree, remote and login, sizes) from ``thrum.sync.diagnose``, in worker
threads, with the logins this daemon would use (plus what the asking CLI passes
along for this request). Store side: every complete line of the log is in the projection (the
stored read position of each shard against the file, under the writer's lock, so
an append in flight is not counted), the counter tables agree with the rows,
the search index holds the live messages as they read (rebuilt at once when it
does not), lines quarantined by the fold, events not pushed yet.

Never stuck behind a sync: while the daemon's own cycle waits on the remote (a
fetch or push that has not ended after `GRACE_S`), the remote check reports that
wait instead of opening a second connection that would wait just as long, and the
sync checks read a status that never waits for the cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import os

import trio

from ...store import projection, search_index
from ..dispatch import Call, method
from .sync import forwarded_param

if TYPE_CHECKING:
    from ...store.log import EventLog, Position
    from ...sync.transport.credentials import Credentials
    from ..context import ServiceContext

GRACE_S = 3.0  # a fetch or push of the daemon's own cycle this long in progress is reported, not joined


def _unfolded(event_log: EventLog, positions: dict[str, Position]) -> tuple[int, int, list[str], int]:
    """(complete lines past the stored position, shards with such lines, torn shards, shards)."""
    lines = lagging = 0
    torn = []
    shards = event_log.shards()
    for shard in shards:
        path = event_log.root / shard
        try:
            size = os.path.getsize(path)
        except OSError:
            continue
        pos = positions.get(shard)
        offset = pos.offset if pos is not None else 0
        if offset > size:
            lagging += 1
            continue
        if offset == size:
            continue
        with open(path, "rb") as f:
            f.seek(offset)
            rest = f.read(min(size - offset, 64 * 2**20))
        n = rest.count(b"\n")
        if n:
            lines += n
            lagging += 1
        elif rest.strip():
            torn.append(shard)
    return lines, lagging, torn, len(shards)


async def _projection_check(ctx: ServiceContext) -> dict[str, Any]:
    lines, lagging, torn, n_shards = await ctx.store.inspect_log(_unfolded)
    drift = await ctx.store.read(projection.verify_counters)
    if drift:
        return {
            "check": "projection",
            "status": "fail",
            "detail": f"{len(drift)} counter(s) disagree with the messages (first: {drift[0]})",
            "action": "stop the daemon, delete .thrum/var/messages.db and start it: it is rebuilt from the log",
        }
    if lines:
        return {
            "check": "projection",
            "status": "warn",
            "detail": f"{lines} line(s) in {lagging} shard(s) are in the log but not in the database",
            "action": "restart the daemon (`thrum daemon restart`): it folds what it has not read at start",
        }
    detail = f"all {n_shards} shard(s) folded into the database; counters agree"
    if torn:
        detail += f"; {len(torn)} shard(s) end in an incomplete line (kept, not applied)"
    return {"check": "projection", "status": "ok", "detail": detail, "action": None}


async def _search_check(ctx: ServiceContext) -> dict[str, Any]:
    """The search index against the messages table; one that disagrees is rebuilt on the spot."""
    problem = await ctx.store.read(search_index.check)
    if problem is None:
        return {
            "check": "search",
            "status": "ok",
            "detail": "the search index holds every live message as it reads now",
            "action": None,
        }
    try:
        await ctx.store.write_local(search_index.rebuild_index)
    except Exception as exc:  # noqa: BLE001 - say so; the projection's own repair is the way out
        return {
            "check": "search",
            "status": "fail",
            "detail": f"{problem}; rebuilding it failed ({type(exc).__name__}: {str(exc)[:200]})",
            "action": "stop the daemon, delete .thrum/var/messages.db and start it: it is rebuilt from the log",
        }
    again = await ctx.store.read(search_index.check)
    return {
        "check": "search",
        "status": "info" if again is None else "fail",
        "detail": f"{problem}; rebuilt it from the messages" + ("" if again is None else f", still wrong: {again}"),
        "action": None
        if again is None
        else "stop the daemon, delete .thrum/var/messages.db and start it: it is rebuilt from the log",
    }


async def _sync_checks(ctx: ServiceContext) -> list[dict[str, Any]]:
    status = await ctx.sync.status()
    quarantined = status.get("quarantined") or 0
    by_kind = status.get("quarantined_by_kind") or {}
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(by_kind.items()))
    out = [
        {
            "check": "quarantine",
            "status": "info" if quarantined else "ok",
            "detail": (
                f"{quarantined} line(s) refused from the log ({kinds}): kept in the files, never applied"
                if quarantined
                else "no line refused from the log"
            ),
            "action": None,
        }
    ]
    out.append(chains_check(status.get("chains") or {}))
    pending = status.get("pending_events") or 0
    mode = status.get("mode")
    if pending and mode == "remote" and status.get("last_error"):
        out.append(
            {
                "check": "pending",
                "status": "warn",
                "detail": f"{pending} local event(s) not pushed; the last sync failed: {status['last_error']}",
                "action": "fix what the remote check says, then run `thrum sync`",
            }
        )
    else:
        last = status.get("last_success") or "never"
        detail = f"{pending} local event(s) not pushed yet; last successful sync: {last}"
        if mode != "remote":
            detail = f"{pending} local event(s) not pushed ({mode} mode)"
        out.append({"check": "pending", "status": "ok", "detail": detail, "action": None})
    return out


def names_check(conflicts: list[dict[str, Any]]) -> dict[str, Any]:
    """Agent names claimed by two keys (`thrum.trust.conflicts`): FAIL while one is in use."""
    open_ones = [c for c in conflicts if c["open"]]
    if open_ones:
        more = f" (and {len(open_ones) - 1} more)" if len(open_ones) > 1 else ""
        return {
            "check": "names",
            "status": "fail",
            "detail": open_ones[0]["message"] + more,
            "action": 'follow README "One name on two machines" on the machine that registered the name later',
        }
    if conflicts:
        names = ", ".join("@" + c["name"] for c in conflicts)
        return {
            "check": "names",
            "status": "info",
            "detail": (
                f"{names}: registered with another key elsewhere; none of its lines arrived in the last 15 minutes"
            ),
            "action": None,
        }
    return {"check": "names", "status": "ok", "detail": "no agent name is claimed by two keys", "action": None}


async def _stuck_sync_check(ctx: ServiceContext, creds: Credentials) -> dict[str, Any] | None:
    """The remote check while the daemon's cycle waits on the remote, or None (probe it)."""
    loop = ctx.sync
    waited = await loop.still_waiting_on_remote(GRACE_S)
    if waited is None:
        return None
    url = loop.remote_url()
    where = f"remote {ctx.config.remote}" + (f" ({url})" if url else "")
    return {
        "check": "remote",
        "status": "warn",
        "detail": (
            f"{where}: a sync has waited {waited:.0f} s so far for it to answer "
            f"(it gives up after {creds.timeout_s:g} s); not probed a second time meanwhile"
        ),
        "action": (
            "check the network and the remote's URL (`git remote -v`); `thrum sync status` shows how the sync ends"
        ),
    }


@method("doctor.run")
async def run(call: Call) -> dict[str, Any]:
    from ...sync import diagnose
    from ...sync.transport.credentials import credentials_from_env

    ctx = call.ctx
    # What the daemon would log in with for a `thrum sync` from this shell: its own
    # environment and config, and what this shell passes along (for this request only).
    env = forwarded_param(call) or {}
    creds = credentials_from_env(
        ctx.config.values,
        forwarded=env,
        own="the daemon's environment",
        passed="the environment of `thrum doctor`",
    )
    repo = ctx.main_repo
    remote = None if ctx.config.local_only else await _stuck_sync_check(ctx, creds)
    if remote is None:
        remote = (
            await trio.to_thread.run_sync(diagnose.remote_check, repo, ctx.config.remote, creds, ctx.config.local_only)
        ).to_dict()
    checks = [
        (await trio.to_thread.run_sync(diagnose.worktree_check, repo)).to_dict(),
        remote,
        await _projection_check(ctx),
        await _search_check(ctx),
        names_check(await ctx.keys.name_conflicts()),
        *await _sync_checks(ctx),
        (await trio.to_thread.run_sync(diagnose.size_check, repo)).to_dict(),
        (await trio.to_thread.run_sync(diagnose.maintenance_check, repo)).to_dict(),
    ]
    return {"checks": checks}


def chains_check(chains: dict[str, Any]) -> dict[str, Any]:
    """Per-writer chains (issue 25): withheld ranges, equivocation, rolled-back history."""
    problems = [g["text"] for g in chains.get("gaps") or []]
    problems += [f["text"] for f in chains.get("faults") or []]
    problems += [r["text"] for r in chains.get("rollbacks") or []]
    if not problems:
        writers = chains.get("writers", 0)
        return {
            "check": "chains",
            "status": "ok",
            "detail": f"{writers} writer chain(s), none with a gap, fork or rollback",
            "action": None,
        }
    forked = chains.get("forks", 0) + chains.get("broken_links", 0)
    shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
    return {
        "check": "chains",
        "status": "fail" if forked else "warn",
        "detail": shown,
        "action": (
            "a fork means one key signed two histories: rotate or revoke that key (`thrum team revoke`)"
            if forked
            else "lines are missing or were removed from the remote: sync with the replicas that wrote "
            "them (`thrum sync status --json` lists each range)"
        ),
    }
