"""sync.run and sync.status."""

from __future__ import annotations

from ... import errors
from ..dispatch import Call, method


def _loop(call: Call):
    if call.ctx.sync is None:
        raise errors.Unavailable("the sync loop is not running")
    return call.ctx.sync


def forwarded_param(raw) -> dict[str, str] | None:
    """The environment a `thrum sync` passed along: only the names it may pass."""
    from ...config import FORWARDED_ENV

    if raw is None:
        return None
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise errors.ValidationError("invalid params: env must be an object of strings", field="env")
    return {k: v for k, v in raw.items() if k in FORWARDED_ENV and v}


@method("sync.run")
async def run(call: Call) -> dict:
    return await _loop(call).sync_now(env=forwarded_param(call.params.raw.get("env")))


@method("sync.status")
async def status(call: Call) -> dict:
    return await _loop(call).status()
