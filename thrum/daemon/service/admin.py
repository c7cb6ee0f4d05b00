"""health and daemon.* methods."""

from __future__ import annotations

import os
from typing import Any

from ... import __version__
from ..dispatch import Call, method


@method("health")
async def health(call: Call) -> dict[str, Any]:
    result = {"status": "ok", "version": __version__, "pid": os.getpid(), "uptime": round(call.ctx.uptime(), 3)}
    view = call.ctx.status().get("view")
    if view and view["state"] != "current":  # the log is fine, queries may lag it: never silently
        result["view"] = view["state"]
        result["view_error"] = view["error"]
    return result


@method("daemon.status")
async def status(call: Call) -> dict[str, Any]:
    result = call.ctx.status()
    result["sync"] = await call.ctx.sync.status()
    return result


@method("daemon.stop")
async def stop(call: Call) -> dict[str, Any]:
    call.ctx.request_shutdown()
    return {"stopping": True, "pid": os.getpid()}
