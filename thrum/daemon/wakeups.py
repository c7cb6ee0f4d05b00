"""Idle wake-ups: typing a short, fixed prompt into the tmux pane of an agent that waits at its prompt.

A host starts no turn for an MCP notification, and an idle agent runs no hook, so a
message that must not wait (the Stop rule: docs/design/hooks.md) would sit until a
person types. When one arrives for a local agent whose pane is known (recorded by
its SessionStart hook or `thrum setup`, ``agent.pane``), the waker looks at the pane
and, only when it is idle, types `PROMPT` and Enter; the host's prompt hook then
shows the messages. Rules:

1. Idle means all three: no keystrokes from an attached client for `IDLE_S`
   (tmux ``client_activity``), no output in the pane's window for `IDLE_S`
   (``window_activity``: an agent at work prints), and the host's input prompt
   shown with nothing typed after it (`prompt_state` over ``capture-pane``).
2. Never in the middle of typing: text after the prompt, or a recent keystroke,
   and the waker waits (checking every `RETRY_S`, for at most `GIVE_UP_S`).
3. At most once per quiet period: after a wake-up, the next one waits until the
   pane showed output more than `RESPONSE_S` after it (the host answered, worked,
   and went quiet again). A host that ignores the prompt is not prompted again.
4. Only `PROMPT`, with a count, is ever typed: never a message's text.
5. Off per agent (``agent.wake``, `thrum wake off`); every wake-up and every
   decision not to is logged, and the last is kept for `thrum wake status`.
6. The panes live in ``.thrum/var/panes.json`` (this machine's terminals: not replicated).
   tmux runs in a child process, never on the event loop.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import trio

from ..store import delivery as delivery_store
from .. import events as ev

log = logging.getLogger(__name__)

IDLE_S = 3.0
RETRY_S = 1.0
GIVE_UP_S = 3600.0
RESPONSE_S = 1.0
PROMPT = "You have {n} new thrum message{s}; run the thrum check (thrum inbox --unread --for-agent, or check_messages)."

# A prompt line: an optional box edge, a prompt sign, then what was typed (group 1).
DEFAULT_PROMPT_RE = r"^\s*[│|┃]?\s*(?:[>❯›»$%]|>>>)\s?(.*?)\s*[│|┃]?\s*$"
TAIL_LINES = 12  # the prompt is looked for among the pane's last non-blank lines (hosts print a status below it)


def prompt_state(screen: str, pattern: str = DEFAULT_PROMPT_RE) -> str:
    """``empty`` (the prompt with nothing typed), ``typing`` (text after it) or ``none`` (no prompt)."""
    regex = re.compile(pattern)
    lines = [line for line in screen.splitlines() if line.strip()][-TAIL_LINES:]
    for line in reversed(lines):
        m = regex.match(line)
        if m:
            return "typing" if (m.group(1) if m.groups() else "").strip() else "empty"
    return "none"


class Pane:
    """Where an agent's host runs: a tmux socket and a pane id, and what the waker did last."""

    def __init__(self, socket: str, pane: str, enabled: bool = True, prompt: str = "", last: dict | None = None):
        self.socket = socket
        self.pane = pane
        self.enabled = enabled
        self.prompt = prompt
        self.last: dict[str, Any] = last or {}  # {"at", "result", "woke_at"?}

    def to_dict(self) -> dict[str, Any]:
        return {
            "socket": self.socket,
            "pane": self.pane,
            "enabled": self.enabled,
            "prompt": self.prompt,
            "last": self.last,
        }


class Waker:
    """Wakes idle local agents in tmux. ``read(fn, ...)`` runs a store query in a worker
    thread; ``flush_delivered()`` records what reached the local agents (pending needs it)."""

    def __init__(
        self,
        read: Callable[..., Awaitable[Any]],
        flush_delivered: Callable[[], Awaitable[Any]],
        state_file: Path,
        *,
        tmux: str = "tmux",
        idle_s: float = IDLE_S,
        retry_s: float = RETRY_S,
    ):
        self._read = read
        self._flush = flush_delivered
        self._file = Path(state_file)
        self._tmux = tmux
        self.idle_s = idle_s
        self.retry_s = retry_s
        self.panes: dict[str, Pane] = self._load()
        self._kicked: set[str] = set()
        self._busy: set[str] = set()
        self._kick = trio.Event()
        self.woken = 0

    # ------------------------------------------------------------------ state
    def _load(self) -> dict[str, Pane]:
        try:
            data = json.loads(self._file.read_text())
        except (OSError, ValueError):
            return {}
        out = {}
        for agent, p in data.items() if isinstance(data, dict) else ():
            if isinstance(p, dict) and isinstance(p.get("socket"), str) and isinstance(p.get("pane"), str):
                out[agent] = Pane(
                    p["socket"],
                    p["pane"],
                    bool(p.get("enabled", True)),
                    str(p.get("prompt") or ""),
                    p.get("last") if isinstance(p.get("last"), dict) else None,
                )
        return out

    def _save(self) -> None:
        tmp = self._file.with_name(self._file.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({a: p.to_dict() for a, p in sorted(self.panes.items())}, f, indent=1)
        os.replace(tmp, self._file)

    async def set_pane(self, agent: str, tmux_env: str, pane: str) -> dict[str, Any]:
        """Remember ``agent``'s pane (``TMUX`` and ``TMUX_PANE`` of its host); keeps its on/off choice."""
        socket = tmux_env.split(",", 1)[0]
        old = self.panes.get(agent)
        self.panes[agent] = Pane(socket, pane, old.enabled if old else True, old.prompt if old else "")
        await trio.to_thread.run_sync(self._save)
        log.info("tmux pane of @%s: %s on %s", agent, pane, socket)
        return self.status(agent)

    async def set_enabled(self, agent: str, enabled: bool, prompt: str | None = None) -> dict[str, Any]:
        p = self.panes.setdefault(agent, Pane("", "", enabled))
        p.enabled = enabled
        if prompt is not None:
            p.prompt = prompt
        await trio.to_thread.run_sync(self._save)
        log.info("idle wake-ups of @%s: %s", agent, "on" if enabled else "off")
        return self.status(agent)

    def status(self, agent: str) -> dict[str, Any]:
        p = self.panes.get(agent)
        if p is None:
            return {"agent": agent, "enabled": True, "pane": None, "socket": None, "last": None}
        return {
            "agent": agent,
            "enabled": p.enabled,
            "pane": p.pane or None,
            "socket": p.socket or None,
            "prompt": p.prompt or None,
            "last": p.last or None,
        }

    # ------------------------------------------------------------------ triggers
    def on_applied(self, applied: list[dict], source: str) -> None:
        """A writer subscriber: a new message may be one that must not wait."""
        if any(d["type"] in ("message.create", "message.unread") for d in applied):
            self._kicked.update(a for a, p in self.panes.items() if p.enabled and p.pane)
            self._kick.set()

    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                await self._kick.wait()
                self._kick = trio.Event()
                kicked, self._kicked = self._kicked, set()
                for agent in sorted(kicked - self._busy):
                    self._busy.add(agent)
                    nursery.start_soon(self._handle, agent)

    async def _handle(self, agent: str) -> None:
        try:
            deadline = trio.current_time() + GIVE_UP_S
            while trio.current_time() < deadline:
                if not await self._try(agent):
                    return
                await trio.sleep(self.retry_s)
        except Exception:  # a wake-up is a courtesy: never let it take the daemon down
            log.exception("idle wake-up of @%s failed", agent)
        finally:
            self._busy.discard(agent)
            if agent in self._kicked:
                self._kick.set()

    async def _try(self, agent: str) -> bool:
        """One look at the pane; True to look again later (the pane is busy)."""
        p = self.panes.get(agent)
        if p is None or not p.enabled or not p.pane:
            return False
        await self._flush()
        found = await self._read(delivery_store.pending, agent, limit=100, now_key=ev.now_rfc3339())
        urgent = [m for m in found["messages"] if m.get("urgent")]
        if not urgent:
            return False
        looked = await self._look(p)
        if looked is None:
            return self._decide(agent, p, "pane gone", again=False)
        now = time.time()
        activity, clients, screen = looked
        woke_at = p.last.get("woke_at")
        if woke_at and activity <= woke_at + RESPONSE_S:
            return self._decide(agent, p, "already woken in this quiet period", again=False)
        if any(now - c < self.idle_s for c in clients):
            return self._decide(agent, p, "keystrokes", again=True)
        if now - activity < self.idle_s:
            return self._decide(agent, p, "working", again=True)
        state = prompt_state(screen, p.prompt or DEFAULT_PROMPT_RE)
        if state != "empty":
            return self._decide(agent, p, "typing" if state == "typing" else "no prompt", again=True)
        n = int(found.get("total") or len(found["messages"]))
        text = PROMPT.format(n=n, s="" if n == 1 else "s")
        if not await self._tmux_ok(p.socket, "send-keys", "-t", p.pane, "-l", text) or not await self._tmux_ok(
            p.socket, "send-keys", "-t", p.pane, "Enter"
        ):
            return self._decide(agent, p, "pane gone", again=False)
        self.woken += 1
        p.last = {"at": ev.now_rfc3339(), "result": "woken", "woke_at": time.time(), "messages": n}
        await trio.to_thread.run_sync(self._save)
        log.info("woke @%s in tmux pane %s for %d message(s)", agent, p.pane, n)
        return False

    def _decide(self, agent: str, p: Pane, why: str, *, again: bool) -> bool:
        if p.last.get("result") != why:
            log.info("not waking @%s (pane %s): %s", agent, p.pane, why)
        woke = p.last.get("woke_at")
        p.last = {"at": ev.now_rfc3339(), "result": why, **({"woke_at": woke} if woke else {})}
        return again

    # ------------------------------------------------------------------ tmux
    async def _run(self, socket: str, *args: str) -> tuple[int, str]:
        cmd = [self._tmux, "-S", socket, *args]
        try:
            proc = await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False)
        except OSError as exc:
            log.warning("cannot run tmux: %s", exc)
            return 127, ""
        return proc.returncode, proc.stdout.decode("utf-8", "replace")

    async def _tmux_ok(self, socket: str, *args: str) -> bool:
        return (await self._run(socket, *args))[0] == 0

    async def _look(self, p: Pane) -> tuple[float, list[float], str] | None:
        """(window's last output, attached clients' last keystrokes, the screen) of the pane; None when gone."""
        code, out = await self._run(
            p.socket,
            "display-message",
            "-p",
            "-t",
            p.pane,
            "#{window_activity} #{session_name}",
            ";",
            "list-clients",
            "-F",
            "#{client_activity} #{client_session}",
            ";",
            "capture-pane",
            "-p",
            "-t",
            p.pane,
        )
        if code != 0 or not out:
            return None
        head, _, rest = out.partition("\n")
        activity, _, session = head.partition(" ")
        clients, screen_lines = [], rest.split("\n")
        while screen_lines and re.fullmatch(r"\d+ .*", screen_lines[0]) and screen_lines[0].split(" ", 1)[1] == session:
            clients.append(float(screen_lines.pop(0).split(" ", 1)[0]))
        try:
            return float(activity), clients, "\n".join(screen_lines)
        except ValueError:
            return None
