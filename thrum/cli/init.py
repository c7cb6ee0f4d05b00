"""``thrum init``: set up thrum in a git repository and start its daemon."""

from __future__ import annotations

import sys

import click

from .common import CONTEXT_SETTINGS, Runtime, global_options, runtime


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--non-interactive", is_flag=True, help="Never prompt (for scripts); implied without a TTY.")
@click.option("--no-daemon", is_flag=True, help="Do not start the daemon now (commands start it when needed).")
@global_options()
def init(non_interactive: bool, no_daemon: bool) -> None:
    """Set up thrum in this git repository (safe to run again).

    Creates .thrum/ (kept out of git), the a-sync branch and its worktree under
    the git directory, and starts the daemon (on a large history it first builds
    its database, showing the rate and the time left). In a linked worktree it points
    this checkout at the main one so the repository keeps one daemon. On a
    terminal it then offers to register a first agent.
    """
    rt = runtime()
    from .. import lifecycle

    interactive = not non_interactive and not rt.opts.json and sys.stdin.isatty() and sys.stdout.isatty()
    from .progress import rebuild_progress

    show = rebuild_progress(rt.opts)  # the fetch, the checkout, the first rebuild: one line on a terminal
    daemon = None
    try:
        paths = lifecycle.init_repo(rt.opts.repo, start_daemon=False, on_progress=show)
        rt._paths = paths
        if not no_daemon:
            daemon = lifecycle.start(paths, on_progress=show)
    finally:  # an error, or the result, starts on a line of its own
        if show is not None:
            show.finish()

    result = {
        "repo": str(paths.repo),
        "thrum_dir": str(paths.thrum_dir),
        "socket": str(paths.socket),
        "redirected": paths.thrum_dir.parent != paths.repo,
        "daemon": daemon,
    }

    def text() -> str:
        lines = [f"> Initialised thrum in {paths.repo}", f"  State:   {paths.thrum_dir}"]
        if result["redirected"]:
            lines.append(f"  Shares the daemon of {paths.main_repo} (linked worktree)")
        if daemon is None:
            lines.append("  Daemon:  not started (--no-daemon)")
        else:
            state = "already running" if daemon.get("already_running") else "started"
            pid = f" (pid {daemon['pid']})" if daemon.get("pid") else ""
            lines.append(f"  Daemon:  {state}{pid}")
        return "\n".join(lines)

    rt.emit(result, text)
    if rt.opts.json:
        return
    if interactive:
        _offer_first_agent(rt)
    else:
        rt.hint("Next: thrum quickstart --name NAME --role ROLE --module MODULE")


def _offer_first_agent(rt: Runtime) -> None:
    from .. import identity as identity_mod
    from .agent import register_agent

    if identity_mod.list_identities(rt.paths.identities):
        rt.hint("Agents here: " + ", ".join(i.label for i in identity_mod.list_identities(rt.paths.identities)))
        return
    click.echo("")
    name = click.prompt("Register an agent now? Agent name (empty to skip)", default="", show_default=False).strip()
    if not name:
        rt.hint("Later: thrum quickstart --name NAME --role ROLE --module MODULE")
        return
    role = click.prompt("Role (e.g. implementer, reviewer)").strip()
    module = click.prompt("Module (optional)", default="", show_default=False).strip()
    register_agent(rt, name, role, module)
