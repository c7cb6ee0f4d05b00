"""``thrum setup HOST``: the MCP server and the hooks of thrum, merged into a host's config files."""

from __future__ import annotations

import difflib
import os

import click

from .common import CONTEXT_SETTINGS, Runtime, global_options, runtime

HOST_NAMES = ("claude", "codex", "gemini", "cursor", "opencode")


class _HostName(click.Choice[str]):
    """A host by its short name, or by the product's longer one as people type it."""

    ALIASES = {"claude-code": "claude", "claudecode": "claude", "gemini-cli": "gemini", "codex-cli": "codex"}

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if isinstance(value, str):
            value = self.ALIASES.get(value.lower(), value.lower())
        return str(super().convert(value, param, ctx))


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("host", type=_HostName(HOST_NAMES))
@click.option("--agent", metavar="NAME", help="The agent the host acts as (default: THRUM_NAME or the only identity).")
@click.option("--user", "user", is_flag=True, help="Write the user's config files instead of the project's.")
@click.option("--dry-run", is_flag=True, help="Show what would change (a diff per file) and write nothing.")
@click.option("--remove", is_flag=True, help="Take thrum's MCP server and hooks out again.")
@global_options()
def setup(host: str, agent: str | None, user: bool, dry_run: bool, remove: bool) -> None:
    """Set up an agent host to use thrum: its MCP server and its hooks.

    Merges the `thrum` MCP server and `thrum hook` entries into the host's own
    config files (project files by default; --user for yours), keeping every other
    setting byte for byte (comments too). Running it again changes nothing;
    --remove takes thrum out. Hosts and files: docs/design/hooks.md.

    \b
      claude    .mcp.json, .claude/settings.json   (--user: ~/.claude.json, ~/.claude/settings.json)
      codex     .codex/config.toml, .codex/hooks.json   (--user: ~/.codex/)
      gemini    .gemini/settings.json   (--user: ~/.gemini/settings.json)
      cursor    .cursor/mcp.json, .cursor/hooks.json   (--user: ~/.cursor/)
      opencode  opencode.json(c), MCP only: opencode has no command hooks   (--user: ~/.config/opencode/)

    \b
    Examples:
      thrum setup claude --agent alice
      thrum setup codex --dry-run
      thrum setup gemini --remove
    """
    from ..hooks import setup as host_setup
    from ..mcp.hostconfig import thrum_executable

    rt = runtime()
    paths = rt.require_init()
    name = agent
    if not remove or name is not None:  # removing needs no agent: thrum's entries are known by their command
        name = _agent(rt, name)
    entry = host_setup.Entry(exe=thrum_executable(), agent=name, repo=None if user else paths.repo)
    changes = host_setup.plan(host, entry, remove=remove)
    if not dry_run:
        host_setup.apply(changes)
        if not remove and name:
            _remember_pane(rt, name)
    base = None if user else paths.repo
    report = host_setup.describe(changes, base)
    if rt.opts.json:
        rt.emit({"host": host, "agent": name, "dry_run": dry_run, "removed": remove, "files": report}, None)
        return
    verb = {"create": "created", "update": "updated", "delete": "deleted", "unchanged": "unchanged"}
    for c, r in zip(changes, report):
        done = verb[r["action"]] if not dry_run else f"would be {verb[r['action']]}"
        if r["action"] == "unchanged" and dry_run:
            done = "unchanged"
        line = f"{r['path']}: {done}"
        if r["entries"]:
            line += f" ({', '.join(r['entries'])})"
        rt.echo(line)
        if dry_run and r["action"] != "unchanged":
            diff = difflib.unified_diff(
                (c.before or "").splitlines(True), (c.after or "").splitlines(True), r["path"], r["path"]
            )
            rt.echo("".join(diff).rstrip("\n"))
    if not remove and not dry_run and any(r["action"] != "unchanged" for r in report):
        rt.note(f"restart {host} (or start a new session) to load thrum; the hooks act as @{name}")


def _agent(rt: Runtime, name: str | None) -> str:
    """The agent to set up: --agent (an identity here), else THRUM_NAME or the only identity.

    Raises:
        IdentityError: no such identity, or none / several without a choice (naming those there are).
    """
    from ..errors import IdentityError
    from .mcp import resolve_identity

    try:
        name_found: str = resolve_identity(rt, name).name
        return name_found
    except IdentityError as exc:
        raise IdentityError(exc.message.replace("--agent-id", "--agent")) from None


def _remember_pane(rt: Runtime, agent: str) -> None:
    """In tmux: the pane this agent's host runs in, for idle wake-ups (best effort)."""
    pane, tmux = os.environ.get("TMUX_PANE"), os.environ.get("TMUX")
    if pane and tmux:
        try:
            rt.call("agent.pane", {"caller": agent, "pane": pane, "tmux": tmux})
        except Exception as exc:  # set-up is done; a wake-up needs the pane, not the other way round
            rt.debug(f"could not record the tmux pane: {exc}")
