"""``thrum sync`` (one full cycle, fit for cron) and ``thrum sync status``."""

from __future__ import annotations

import click

from ..config import forwarded_env
from ..errors import ThrumError
from .common import CONTEXT_SETTINGS, global_options, runtime


def _daemon_running(rt) -> bool:
    from .. import lifecycle

    return lifecycle.is_running(rt.require_init())


def _offline_sync_running(rt) -> bool:
    from ..sync.offline import offline_sync_running

    return offline_sync_running(rt.require_init())


@click.group(context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@global_options()
@click.pass_context
def sync(ctx):
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


def _summary(r: dict) -> str:
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
def status():
    """Show sync mode, remote, a sync in progress, last success and last error, pending and
    quarantined events, and paths of the a-sync branch thrum ignores (links, submodules,
    unknown files). Answers at once, also while a sync waits on a slow remote."""
    rt = runtime()
    if _daemon_running(rt) and not _offline_sync_running(rt):
        result = rt.call("sync.status", {}, autostart=False)
    else:
        from ..sync import offline

        result = offline.status(rt.require_init())
    rt.emit(result, lambda: _status_text(result))


def _status_text(s: dict) -> str:
    lines = [f"Mode:          {s['mode']}"]
    if s.get("remote"):
        url = f" ({s['remote_url']})" if s.get("remote_url") else ""
        lines.append(f"Remote:        {s['remote']}{url}")
    if s.get("credential_source"):
        lines.append(f"Login:         {s['credential_source']}")
    if s.get("syncing_since"):
        waiting = s.get("waiting_for_remote_since")
        lines.append(
            f"Syncing:       since {s['syncing_since']}"
            + (f" (waiting for the remote to answer since {waiting})" if waiting else "")
        )
    lines.append(f"Last success:  {s.get('last_success') or 'never'}")
    if s.get("last_error"):
        lines.append(f"Last error:    {s['last_error']} (at {s.get('last_error_at')})")
    if s.get("pending_events") is not None:
        lines.append(f"Pending:       {s['pending_events']} local event(s) not yet pushed")
    team = s.get("team")
    if team:
        if team.get("trust") == "team-root":
            lines.append(f"Trust:         team root ({team.get('policy')} policy; {team.get('source')})")
        else:
            why = f"; {team['error']}" if team.get("error") else ""
            lines.append(f"Trust:         trust on first use (no team root: thrum team init{why})")
        for item in team.get("retired") or []:
            lines.append(f"Retired key:   {item['name']} {item['key'][:12]}… {item['why']}")
    if s.get("quarantined") is not None:
        lines.append(f"Quarantined:   {s['quarantined']} line(s)/event(s) refused from the log")
    chains = s.get("chains") or {}
    as_of = f" (as of the daemon's last sync, {chains['at']})" if chains.get("at") else ""
    for item in [*(chains.get("gaps") or []), *(chains.get("faults") or [])]:
        lines.append(f"Chains:        {item['text']}{as_of}")
    for item in chains.get("rollbacks") or []:
        lines.append(f"Chains:        {item['text']}")
    for c in s.get("name_conflicts") or []:
        state = "in use" if c.get("open") else "quiet for 15 minutes or more"
        lines.append(f"Conflicts:     @{c['name']} has a second key ({state}): {c['message']}")
    ignored = s.get("ignored_paths_by_reason")
    if ignored is None:
        ignored = (s.get("last_report") or {}).get("ignored_paths_by_reason")
    if ignored:
        detail = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(ignored.items()))
        lines.append(
            f"Ignored:       {sum(ignored.values())} path(s) in a-sync that are not thrum's ({detail}); "
            f"never checked out"
        )
    return "\n".join(lines)


__all__ = ["sync", "ThrumError"]
