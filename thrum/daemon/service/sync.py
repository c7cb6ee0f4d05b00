"""sync.run and sync.status."""

from __future__ import annotations

from ... import errors
from ..dispatch import Call, method


def _loop(call: Call):
    if call.ctx.sync is None:
        raise errors.Unavailable("the sync loop is not running")
    return call.ctx.sync


@method("sync.run")
async def run(call: Call) -> dict:
    return await _loop(call).sync_now()


@method("sync.status")
async def status(call: Call) -> dict:
    return await _loop(call).status()
