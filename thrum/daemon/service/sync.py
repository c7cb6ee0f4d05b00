"""sync.run and sync.status."""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

from ... import errors
from ..dispatch import Call, method
from ..peer import require_own_user

if TYPE_CHECKING:
    from ..syncer import SyncLoop


def _loop(call: Call) -> SyncLoop:
    return call.ctx.sync


def forwarded_param(call: Call) -> dict[str, str] | None:
    """The environment a `thrum sync` (or `thrum doctor`) passed along, for this one request.

    Only from the local user's own CLI over the Unix socket (`thrum.daemon.peer`), and
    only the variables of `thrum.config.FORWARDED_ENV`: logins, never anything that
    names a config file or a program (docs/design/remotes.md).

    Raises:
        Forbidden: passed over the WebSocket, or by another user.
        ValidationError: not an object of strings, or a variable outside the allow-list.
    """
    from ...config import FORWARDED_ENV

    raw = call.params.raw.get("env")
    if raw is None:
        return None
    require_own_user(call.conn, "env (variables passed along for the remote's login)")
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise errors.ValidationError("invalid params: env must be an object of strings", field="env")
    refused = sorted(k for k in raw if k not in FORWARDED_ENV)
    if refused:
        raise errors.ValidationError(
            f"invalid params: env may carry only {', '.join(FORWARDED_ENV)}; "
            f"{', '.join(name[:60] for name in refused[:5])} may not be passed along",
            field="env",
        )
    return {k: v for k, v in raw.items() if v}


@method("sync.run")
async def run(call: Call) -> dict[str, Any]:
    """One full cycle. It fails (after doing its work) while an agent name is claimed by two
    keys and the other key's lines still arrive: its messages are being lost (issue 30, item 4)."""
    result = await _loop(call).sync_now(env=forwarded_param(call))
    open_conflicts = [c for c in await call.ctx.keys.name_conflicts() if c["open"]]
    if open_conflicts:
        more = f" (and {len(open_conflicts) - 1} more: `thrum sync status`)" if len(open_conflicts) > 1 else ""
        raise errors.SyncFailed(
            open_conflicts[0]["message"] + more, data={"name_conflicts": open_conflicts, "sync": result}
        )
    return result


@method("sync.status")
async def status(call: Call) -> dict[str, Any]:
    result = await _loop(call).status()
    result["name_conflicts"] = await call.ctx.keys.name_conflicts()
    return result


@method("sync.chains")
async def chains(call: Call) -> dict[str, Any]:
    """Each writer's chain as this replica holds it: gaps, forks, broken links, rollbacks
    (the ``chains`` of `sync.status`, for the web UI and `thrum doctor`)."""
    chains: dict[str, Any] = (await _loop(call).status())["chains"]
    return chains
