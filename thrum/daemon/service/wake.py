"""agent.pane and agent.wake: where an agent's host runs in tmux, and its idle wake-ups (thrum.daemon.wakeups)."""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

import re

from ... import errors
from ..dispatch import Call, method

if TYPE_CHECKING:
    from ..wakeups import Waker

_PANE = re.compile(r"%[0-9]{1,9}")


def _waker(call: Call) -> Waker:
    return call.ctx.waker


@method("agent.pane")
async def pane(call: Call) -> dict[str, Any]:
    """Record the caller's tmux pane: ``pane`` (``TMUX_PANE``, e.g. ``%3``) and ``tmux`` (``TMUX``)."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    pane_id = p.str("pane", required=True, max_len=12)
    if not _PANE.fullmatch(pane_id):
        raise errors.ValidationError(f"invalid params: pane {pane_id!r} is not a tmux pane id (%N)", field="pane")
    tmux = p.str("tmux", required=True, max_len=4096, allow_empty=False)
    if not tmux.startswith("/"):
        raise errors.ValidationError("invalid params: tmux must be the TMUX variable (socket path first)", field="tmux")
    return await _waker(call).set_pane(caller, tmux, pane_id)


@method("agent.wake")
async def wake(call: Call) -> dict[str, Any]:
    """The caller's idle wake-ups: ``enabled`` turns them on or off, ``prompt`` (a regular
    expression, group 1 the typed text) says what its host's input prompt looks like;
    without either, the status."""
    p = call.params
    caller = await call.ctx.agents.caller(p)
    waker = _waker(call)
    prompt = p.str("prompt", max_len=500)
    if prompt is not None:
        try:
            re.compile(prompt)
        except re.error as exc:
            raise errors.ValidationError(
                f"invalid params: prompt is not a regular expression ({exc})", field="prompt"
            ) from None
    if "enabled" in p or prompt is not None:
        current = waker.status(caller)["enabled"]
        return await waker.set_enabled(caller, p.bool("enabled", default=current), prompt)
    return waker.status(caller)
