"""``thrum ui``: ask the daemon for the Web UI and print its one-time URL (``--open``: open it)."""

from __future__ import annotations

import click

from .common import CONTEXT_SETTINGS, global_options, runtime


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--open", "open_browser", is_flag=True, help="Also open the URL in your web browser.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    metavar="N",
    help="Serve the UI on port N (0: any free port). Default: ui_port from .thrum/config.json "
    "(9998), or a free port when that one is taken.",
)
@global_options()
def ui(open_browser, port):
    """Watch and steer your agents from a browser: prints the Web UI's URL.

    The daemon serves the page on 127.0.0.1 only. The URL carries a one-time
    code that signs one browser in: it works once, within 5 minutes. Run
    `thrum ui` again for another browser, or after the daemon restarts (which
    ends every browser session).

    \b
    Examples:
      thrum ui --open
      thrum ui --port 8080
      thrum ui --json        # {url, port, ws_port, expires_in}
    """
    rt = runtime()
    result = rt.call("ui.open", {} if port is None else {"port": port})
    rt.emit(result, lambda: result["url"])
    if not rt.opts.json:
        rt.note(f"the link signs in one browser and expires in {result.get('expires_in', 300) // 60} minutes")
    if open_browser:
        import webbrowser

        try:
            opened = webbrowser.open(result["url"])
        except Exception:  # a broken BROWSER setting must not fail the command: the URL is printed
            opened = False
        if not opened:
            rt.warn("could not open a web browser; open the URL above yourself")
