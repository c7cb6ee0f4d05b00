"""``thrum mcp serve`` (the MCP server on stdio) and ``thrum mcp config`` (host set-up)."""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING

import click

from .. import identity as identity_mod
from ..errors import IdentityError, KeyRetired, ThrumError, Timeout, Unavailable
from ..events.names import NAME_RE
from .common import CONTEXT_SETTINGS, Runtime, global_options, runtime

if TYPE_CHECKING:
    from ..identity import Identity


@click.group(context_settings=CONTEXT_SETTINGS)
@global_options()
def mcp() -> None:
    """Serve thrum to MCP hosts (Claude Code, Codex, Cursor, ...).

    \b
    Set-up in one command (prints what to paste or run):
      thrum mcp config --agent-id alice --host claude
    """


def resolve_identity(rt: Runtime, agent_id: str | None) -> Identity:
    """The serving agent: --agent-id, else THRUM_NAME, the global flags, the single identity file.

    Raises:
        IdentityError: no such identity, or none / several without a choice (names those that exist).
    """
    paths = rt.require_init()
    if not agent_id:
        try:
            return rt.identity()
        except IdentityError as exc:
            raise IdentityError(
                exc.message.replace(
                    "choose one with THRUM_NAME=<name> or --name <name>",
                    "choose one with --agent-id NAME (or THRUM_NAME)",
                )
            ) from None
    known = ", ".join(i.label for i in identity_mod.list_identities(paths.identities)) or "none"
    if not NAME_RE.fullmatch(agent_id):
        raise IdentityError(
            f"--agent-id {agent_id!r} is not a valid agent name (lowercase letters, digits and _); "
            f"known identities: {known}"
        )
    path = paths.identities / f"{agent_id}.json"
    if not path.is_file():
        raise IdentityError(
            f"no identity {agent_id!r} in {paths.identities}; known identities: {known}; "
            f"register it with `thrum quickstart --name {agent_id} --role ROLE`"
        )
    os.environ["THRUM_NAME"] = agent_id  # spec: --agent-id sets THRUM_NAME
    return identity_mod.load(path)


def _make_known(rt: Runtime, ident: Identity) -> None:
    """Before speaking MCP: the daemon runs and knows the agent (registered from its identity
    file, as the CLI does, when it does not: a fresh clone, an identity copied from another
    machine). A refusal ends the start-up with one line instead of a server that never answers.

    Raises:
        ThrumError: the daemon cannot be reached, refuses to register the agent, or its key
            is retired (revoked, or rotated away on another machine).
    """
    caller = {"caller": ident.name}
    try:
        try:
            rt.call("session.heartbeat", caller)
        except IdentityError:
            rt.call("agent.register", identity_mod.register_params(ident, rt.paths.repo))
            rt.call("session.heartbeat", caller)
    except (Unavailable, Timeout) as exc:
        raise ThrumError(f"cannot reach the thrum daemon: {exc.message}") from None
    except KeyRetired as exc:  # registered, but its key may not write (the session's start is a write)
        raise ThrumError(f"cannot serve as @{ident.name}: {exc.message}") from None
    except ThrumError as exc:
        raise ThrumError(f"cannot serve as @{ident.name}: the daemon refused to register it: {exc.message}") from None


@mcp.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--agent-id",
    metavar="NAME",
    help="Serve as this agent (.thrum/identities/NAME.json); default: THRUM_NAME or the only identity.",
)
@global_options()
def serve(agent_id: str | None) -> None:
    """Run the MCP server on stdin/stdout (started by an MCP host).

    Resolves the agent, makes sure the daemon runs (starting it when needed),
    then speaks MCP on stdio until the host closes stdin. Logs go to stderr
    (--verbose or THRUM_LOG_LEVEL=DEBUG for more).

    \b
    Tools: send_message, check_messages, wait_for_message, list_agents,
    broadcast_message, create_group, delete_group, add_group_member,
    remove_group_member, list_groups, get_group.
    """
    rt = runtime()
    ident = resolve_identity(rt, agent_id)
    try:
        _make_known(rt, ident)
    finally:
        rt.close()
    from ..mcp import server

    gc.freeze()  # the MCP SDK's models, out of the collector's scans (~120 ms of CPU at exit)
    server.run(rt.paths, ident, verbose=rt.opts.verbose)


@mcp.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--agent-id", metavar="NAME", help="The agent the host acts as (default: THRUM_NAME or the only identity)."
)
@click.option(
    "--host",
    "host",
    type=click.Choice(["json", "claude", "cursor", "codex"]),
    default="json",
    show_default=True,
    help="json: the mcpServers object; claude/codex: their `mcp add` command; cursor: .cursor/mcp.json.",
)
@global_options()
def config(agent_id: str | None, host: str) -> None:
    """Print the MCP host configuration for this repository and agent.

    Paths are absolute (the installed thrum, this repository), so it works from
    any directory. Where to put it is printed on stderr.

    \b
    Examples:
      thrum mcp config --agent-id alice                 # JSON for .mcp.json / settings
      thrum mcp config --agent-id alice --host claude   # a `claude mcp add` line
      eval "$(thrum mcp config --agent-id alice --host codex)"
    """
    from ..mcp import hostconfig

    rt = runtime()
    ident = resolve_identity(rt, agent_id)
    executable = hostconfig.thrum_executable()
    repo = rt.paths.repo
    text = hostconfig.render(host, executable=executable, repo=repo, agent=ident.name)
    if rt.opts.json:
        rt.emit(
            {
                "host": host,
                "agent": ident.name,
                "repo": str(repo),
                "command": executable,
                "args": hostconfig.serve_args(repo, ident.name),
                "config": text,
            },
            None,
        )
        return
    click.echo(text)
    rt.note(hostconfig.WHERE[host])
