"""``thrum ui``: ask the daemon for the Web UI and print its one-time URL (``--open``: open it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .common import CONTEXT_SETTINGS, global_options, runtime


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--open",
    "open_browser",
    is_flag=True,
    help="Also open the UI in your web browser (through a private file: the code never appears on a command line).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    metavar="N",
    help="Serve the UI on port N (0: any free port). Default: ui_port from .thrum/config.json "
    "(9998), or a free port when that one is taken.",
)
@click.option("--sign-out", "sign_out", is_flag=True, help="End every browser session and stop serving the UI.")
@global_options()
def ui(open_browser: bool, port: int | None, sign_out: bool) -> None:
    """Watch and steer your agents from a browser: prints the Web UI's URL.

    The daemon serves the page on 127.0.0.1 only. The URL carries a one-time
    code that signs one browser tab in: it works once, within 5 minutes. The
    tab stays signed in across daemon restarts for 7 days, or until
    `thrum ui --sign-out`. Run `thrum ui` again for another browser.

    \b
    Examples:
      thrum ui --open
      thrum ui --port 8080
      thrum ui --json        # {url, port, ws_port, expires_in}
      thrum ui --sign-out
    """
    rt = runtime()
    if sign_out:
        if open_browser or port is not None:
            raise click.UsageError("--sign-out takes no other option")
        result = rt.call("ui.signout", {})
        rt.emit(result, lambda: "signed out: every browser session has ended and the UI is closed")
        return
    params: dict[str, Any] = {} if port is None else {"port": port}
    if open_browser:
        params["handover"] = True
    result = rt.call("ui.open", params)
    rt.emit(result, lambda: result["url"])
    if not rt.opts.json:
        rt.note(f"the link signs in one browser tab and expires in {result.get('expires_in', 300) // 60} minutes")
    if open_browser:
        import webbrowser

        target = Path(result["handover_file"]).as_uri() if result.get("handover_file") else result["url"]
        try:
            opened = webbrowser.open(target)
        except Exception:  # a broken BROWSER setting must not fail the command: the URL is printed
            opened = False
        if not opened:
            rt.warn("could not open a web browser; open the URL above yourself")
