"""ui.open / ui.signout: the Web UI's listener and its browser sessions (thrum/ui/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ... import errors
from ..dispatch import Call, method

if TYPE_CHECKING:
    from ..plugins import UiPlugin


def _web_ui(call: Call) -> UiPlugin:
    ui = call.ctx.web_ui
    if ui is None:
        raise errors.Unavailable("the Web UI is not available in this daemon")
    return ui


@method("ui.open")
async def ui_open(call: Call) -> dict[str, Any]:
    """``port?`` (0: any free port), ``handover?`` → ``{url, port, ws_port, expires_in, handover_file?}``.

    ``handover``: also write the URL into a private page under ``.thrum/var/ui-open/``
    that forwards a browser to it, so that ``thrum ui --open`` never puts the code on
    a command line.
    """
    port = call.params.int("port", minimum=0, maximum=65535)
    return await _web_ui(call).open(port, handover=call.params.bool("handover"))


@method("ui.signout")
async def ui_signout(call: Call) -> dict[str, Any]:
    """End every browser session and stop the UI's listener → ``{signed_out, port}``."""
    return await _web_ui(call).sign_out()
