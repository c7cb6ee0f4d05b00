"""``thrum sync`` (one full cycle, fit for cron) and ``thrum sync status``."""

from __future__ import annotations

from typing import Any

import click

from ..config import forwarded_env
from ..errors import ThrumError
from .common import CONTEXT_SETTINGS, Runtime, global_options, runtime
from .render.status import render_sync_status


def _daemon_running(rt: Runtime) -> bool:
    from .. import lifecycle

    return lifecycle.is_running(rt.require_init())


def _offline_sync_running(rt: Runtime) -> bool:
    from ..sync.offline import offline_sync_running

    return offline_sync_running(rt.require_init())


@click.group(context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@global_options()
@click.pass_context
def sync(ctx: click.Context) -> None:
    """Replicate the message log through the git remote: commit, fetch, merge, push.

    Runs one full cycle and waits for it; exits 1 with a one-line reason when it
    fails. Works with the daemon stopped too (it then runs the cycle itself).
    Logins come from THRUM_GIT_TOKEN / THRUM_SSH_KEY (this command passes them to
    the daemon, which keeps them for its automatic syncs until a later `thrum sync`
    passes others), else from what makes `git push` work: git's credential helpers,
    ssh-agent, ~/.ssh/config and key files.
    --quiet prints nothing on success (for cron). Cron example (cron's PATH seldom
    holds thrum: give its full path, `command -v thrum` prints it):
      */5 * * * *  cd /path/to/repo && /path/to/venv/bin/thrum sync --quiet
    """
    if ctx.invoked_subcommand is not None:
        return
    rt = runtime()
    # Offline syncs take turns; whoever holds the daemon's flock while we hold the turn is a
    # daemon (run_unless_daemon answers None): no check before it could race with a sync ending.
    from ..sync.offline import run_unless_daemon

    result = run_unless_daemon(
        rt.require_init(),
        starting=lambda: rt.note("daemon not running; syncing without it"),
        waiting=lambda: rt.note("another `thrum sync` runs without the daemon; waiting for it to finish"),
    )
    if result is None:  # a daemon runs: it syncs
        result = rt.call("sync.run", {"env": forwarded_env()}, autostart=False, timeout=600)
    if rt.opts.quiet and not rt.opts.json:
        return  # cron mails whatever a job prints: success says nothing
    rt.emit(result, lambda: _summary(result))


def _summary(r: dict[str, Any]) -> str:
    if r["mode"] == "local-only":
        return (
            f"> Local-only mode: committed {r['commits']} change(s); nothing fetched or pushed "
            f"({r['duration_ms']:.0f} ms)"
        )
    if r["mode"] == "no-remote":
        return (
            f"> No remote configured: committed {r['commits']} change(s) "
            f"(add one with `git remote add origin URL`) ({r['duration_ms']:.0f} ms)"
        )
    refused = f", refused {r['quarantined']} (quarantined: `thrum sync status`)" if r.get("quarantined") else ""
    text = (
        f"> Synced with {r['remote']}: sent {r['sent']} event(s), received {r['received']}{refused}, "
        f"{r['commits']} commit(s){'' if r['pushed'] else ', nothing pushed'} in {r['duration_ms']:.0f} ms"
    )
    if r.get("rolled_back"):
        text += f"\n> {r['rolled_back']['text']}"
    return text


@sync.command("status", context_settings=CONTEXT_SETTINGS)
@global_options()
def status() -> None:
    """Show sync mode, remote, a sync in progress, last success and last error, pending and
    quarantined events, and paths of the a-sync branch thrum ignores (links, submodules,
    unknown files). Answers at once, also while a sync waits on a slow remote."""
    rt = runtime()
    if _daemon_running(rt) and not _offline_sync_running(rt):
        result = rt.call("sync.status", {}, autostart=False)
    else:
        from ..sync import offline

        result = offline.status(rt.require_init())
    rt.emit(result, lambda: render_sync_status(result))


__all__ = ["sync", "ThrumError"]
