"""``thrum wake on|off|status``: idle wake-ups of this agent in tmux (docs/design/hooks.md)."""

from __future__ import annotations

from typing import Any

import click

from .common import CONTEXT_SETTINGS, global_options, runtime


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("action", type=click.Choice(["on", "off", "status"]), default="status")
@click.option(
    "--prompt",
    metavar="REGEX",
    help="What your host's input prompt looks like (group 1: the typed text), when the default does not match it.",
)
@global_options()
def wake(action: str, prompt: str | None) -> None:
    """Turn idle wake-ups on or off for this agent, or show them.

    When a message that must not wait (a direct mention, high or critical
    priority, an ack asked for) arrives while this agent's host sits idle at its
    prompt in tmux, thrum types a short fixed prompt into its pane so that the host
    starts a turn and its hook shows the message. The pane is recorded by the
    host's start hook or by `thrum setup`.
    """
    rt = runtime()
    params: dict[str, Any] = {}
    if action != "status":
        params["enabled"] = action == "on"
    if prompt is not None:
        params["prompt"] = prompt
    result = rt.agent_call("agent.wake", params)

    def text() -> str:
        lines = [f"Idle wake-ups for @{result['agent']}: {'on' if result['enabled'] else 'off'}"]
        lines.append(
            f"  Pane: {result['pane']} ({result['socket']})" if result.get("pane") else "  Pane: not recorded yet"
        )
        last = result.get("last")
        if last:
            lines.append(f"  Last: {last.get('result')} at {last.get('at')}")
        return "\n".join(lines)

    rt.emit(result, text)
