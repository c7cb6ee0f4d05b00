"""health and daemon.* methods."""

from __future__ import annotations

import os
import time

from ... import __version__
from ..dispatch import Call, method


@method("health")
async def health(call: Call) -> dict:
    d = call.daemon
    return {"status": "ok", "version": __version__, "pid": os.getpid(),
            "uptime": round(time.monotonic() - d.started_mono, 3)}


@method("daemon.status")
async def status(call: Call) -> dict:
    result = call.daemon.status()
    if call.daemon.sync is not None:
        result["sync"] = await call.daemon.sync.status()
    return result


@method("daemon.stop")
async def stop(call: Call) -> dict:
    call.daemon.request_shutdown()
    return {"stopping": True, "pid": os.getpid()}
