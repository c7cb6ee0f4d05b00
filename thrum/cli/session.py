"""``thrum session start|end|list``."""

from __future__ import annotations

from typing import Any

import click

from ..errors import ThrumError
from .common import CONTEXT_SETTINGS, global_options, runtime
from .render.directory import render_sessions


@click.group(context_settings=CONTEXT_SETTINGS)
@global_options()
def session() -> None:
    """Agent work sessions: start, end, list.

    A session starts automatically when an agent acts without one.
    """


@session.command("start", context_settings=CONTEXT_SETTINGS)
@global_options()
def start() -> None:
    """Start a session for this agent."""
    rt = runtime()
    result = rt.agent_call("session.start", {})
    rt.emit(result, f"> Session started: {result.get('session_id')} (@{result.get('agent_id') or rt.caller})")


@session.command("end", context_settings=CONTEXT_SETTINGS)
@click.option("--session", "session_id", metavar="SESSION_ID", help="The session to end (default: the active one).")
@click.option(
    "--reason",
    type=click.Choice(("normal", "crash")),
    default="normal",
    show_default=True,
    help="Why the session ends.",
)
@global_options()
def end(session_id: str | None, reason: str) -> None:
    """End this agent's active session."""
    rt = runtime()
    params = {"reason": reason}
    if session_id:
        params["session_id"] = session_id
    result = rt.agent_call("session.end", params)
    rt.emit(result, f"> Session ended: {result.get('session_id')} ({result.get('reason') or reason})")


@session.command("list", context_settings=CONTEXT_SETTINGS)
@click.option("--agent", "agent_name", metavar="NAME", help="Sessions of this agent (default: mine).")
@click.option("--all-agents", is_flag=True, help="Sessions of every agent.")
@click.option("--active", is_flag=True, help="Only active sessions.")
@global_options()
def list_(agent_name: str | None, all_agents: bool, active: bool) -> None:
    """List sessions (mine by default)."""
    rt = runtime()
    params: dict[str, Any] = {}
    if agent_name and all_agents:
        raise click.UsageError("give --agent NAME or --all-agents, not both")
    if agent_name:
        params["agent"] = agent_name.lstrip("@")
    elif not all_agents:
        try:
            params["agent"] = rt.identity().name
        except ThrumError:
            pass  # no identity here: show everyone's
    if active:
        params["active_only"] = True
    result = rt.call("session.list", params)
    rt.emit(result, lambda: render_sessions(result.get("sessions") or []))
