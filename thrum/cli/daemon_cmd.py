"""``thrum daemon start|stop|status|restart|run``: thin wrappers over `thrum.lifecycle`."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import click

from .common import CONTEXT_SETTINGS, global_options, runtime
from .render.status import render_daemon_status


def _lifecycle() -> ModuleType:
    from .. import lifecycle

    return lifecycle


def _pid(res: dict[str, Any] | None) -> str:
    return f" (pid {res['pid']})" if isinstance(res, dict) and res.get("pid") else ""


@click.group(context_settings=CONTEXT_SETTINGS)
@global_options()
def daemon() -> None:
    """Control this repository's thrum daemon.

    Commands that need the daemon start it on their own (THRUM_NO_AUTOSTART=1
    turns that off).
    """


@daemon.command("start", context_settings=CONTEXT_SETTINGS)
@global_options()
def start() -> None:
    """Start the daemon in the background (no-op when it is running)."""
    rt = runtime()
    from .progress import rebuild_progress

    res = _lifecycle().start(rt.require_init(), on_progress=rebuild_progress(rt.opts))
    if res.get("already_running") or not res.get("started", True):
        text = f"Daemon already running{_pid(res)}"
    else:
        text = f"> Daemon started{_pid(res)}"
    rt.emit(res, text)


@daemon.command("stop", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, None),
    default=10.0,
    show_default=True,
    help="Seconds to wait for a graceful stop.",
)
@global_options()
def stop(timeout: float) -> None:
    """Stop the daemon gracefully (pending writes are flushed)."""
    rt = runtime()
    res = _lifecycle().stop(rt.require_init(), timeout=timeout)
    text = f"> Daemon stopped{_pid(res)}" if res.get("stopped") else "Daemon is not running"
    rt.emit(res, text)


@daemon.command("restart", context_settings=CONTEXT_SETTINGS)
@global_options()
def restart() -> None:
    """Stop the daemon (if running) and start it again."""
    rt = runtime()
    res = _lifecycle().restart(rt.require_init())
    rt.emit(res if isinstance(res, dict) else {"restarted": True}, f"> Daemon restarted{_pid(res)}")


NOT_RUNNING = 3  # the LSB `status` convention (systemctl too): "program is not running"


@daemon.command("status", context_settings=CONTEXT_SETTINGS)
@global_options()
def status() -> None:
    """Show whether the daemon runs, its pid, uptime, socket and repository.

    Exits 0 when the daemon is running and 3 when it is not (for scripts).
    """
    rt = runtime()
    paths = rt.paths
    if not paths.initialized:
        res = {
            "running": False,
            "pid": None,
            "uptime": None,
            "socket": str(paths.socket),
            "repo": str(paths.repo),
            "initialized": False,
        }
        rt.emit(res, f"Daemon:  not running\nthrum is not initialised in {paths.repo}; run `thrum init`")
    else:
        res = _lifecycle().status(paths)
        rt.emit(res, lambda: render_daemon_status(res))
    if not res.get("running"):
        click.get_current_context().exit(NOT_RUNNING)


@daemon.command("run", context_settings=CONTEXT_SETTINGS)
@global_options()
def run() -> None:
    """Run the daemon in the foreground (for service managers; Ctrl-C stops it)."""
    rt = runtime()
    code = _lifecycle().run_foreground(rt.require_init())
    if code:
        click.get_current_context().exit(int(code))
