"""ui.open: start (or reuse) the Web UI's listener and hand out a one-time login URL (thrum/ui/)."""

from __future__ import annotations

from ... import errors
from ..dispatch import Call, method


@method("ui.open")
async def ui_open(call: Call) -> dict:
    """``port?`` (0: any free port) → ``{url, port, ws_port, expires_in}``."""
    ui = call.ctx.web_ui
    if ui is None:
        raise errors.Unavailable("the Web UI is not available in this daemon")
    port = call.params.int("port", minimum=0, maximum=65535)
    return await ui.open(port)
