"""Idle wake-ups: typing a short, fixed prompt into the tmux pane of an agent that waits at its prompt.

A host starts no turn for an MCP notification, and an idle agent runs no hook, so a
message that must not wait (the Stop rule: docs/design/hooks.md) would sit until a
person types. When one arrives for a local agent whose pane is known (recorded by
its SessionStart hook or `thrum setup`, ``agent.pane``), the waker looks at the pane
and, only when it is idle, types `PROMPT` and Enter; the host's prompt hook then
shows the messages. Rules:

1. Idle is judged by what the pane shows, watched over time: the waker looks at
   each watched pane every `WATCH_S` (the screen's text and cursor, one tmux call)
   and remembers when it last changed. Idle means all of: the screen unchanged for
   `IDLE_S` (an agent at work prints, a spinner turns, typed keys echo), no
   keystroke from an attached client for `IDLE_S` (tmux ``client_activity``), the
   pane not in copy mode, and the host's input prompt shown with nothing typed
   after it (`prompt_state`). tmux's own ``window_activity`` is not used: it counts
   whole seconds, and a detached session did not always advance it for output.
2. Never in the middle of typing: text after the prompt, a recent keystroke or a
   changing screen, and the waker waits (looking again every `RETRY_S`, for at
   most `GIVE_UP_S`).
3. At most once per quiet period: a wake-up remembers the messages it was for.
   While all of them are still waiting to be surfaced (the host did not take them
   in: it ignored the prompt, or nobody answered) no new message wakes the pane
   again. Once the host answered (its hook or tool surfaced one of them, or it was
   read) the next wake-up waits for the pane to be idle again (rule 1), which its
   answer's output has restarted.
4. Only `PROMPT`, with a count, is ever typed: never a message's text.
5. Off per agent (``agent.wake``, `thrum wake off`); every wake-up and every
   decision not to is logged, and the last is kept for `thrum wake status`.
6. The panes live in ``.thrum/var/panes.json`` (this machine's terminals: not
   replicated). tmux runs in a child process, never on the event loop. Time is
   trio's clock, so tests can drive it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, NamedTuple

import trio

from ..store import delivery as delivery_store
from .. import events as ev

log = logging.getLogger(__name__)

IDLE_S = 3.0
WATCH_S = 1.0
RETRY_S = 1.0
GONE_S = 60.0  # a pane that was gone is looked for again this often (the watch)
GIVE_UP_S = 3600.0
PROMPT = "You have {n} new thrum message{s}; run the thrum check (thrum inbox --unread --for-agent, or check_messages)."

# A prompt line: an optional box edge, a prompt sign, then what was typed (group 1).
DEFAULT_PROMPT_RE = r"^\s*[│|┃]?\s*(?:[>❯›»$%]|>>>)\s?(.*?)\s*[│|┃]?\s*$"
TAIL_LINES = 12  # the prompt is looked for among the pane's last non-blank lines (hosts print a status below it)
_SCREEN = "thrum:screen-follows"  # separates tmux's answers from the captured screen


def prompt_state(screen: str, pattern: str = DEFAULT_PROMPT_RE) -> str:
    """``empty`` (the prompt with nothing typed), ``typing`` (text after it) or ``none`` (no prompt)."""
    regex = re.compile(pattern)
    lines = [line for line in screen.splitlines() if line.strip()][-TAIL_LINES:]
    for line in reversed(lines):
        m = regex.match(line)
        if m:
            return "typing" if (m.group(1) if m.groups() else "").strip() else "empty"
    return "none"


class Look(NamedTuple):
    """One look at a pane: what it shows and who touched it."""

    screen: str
    digest: str  # of the screen and the cursor: equal digests, nothing changed
    keystrokes: list[float]  # attached clients' last keystroke (epoch seconds)
    in_mode: bool  # copy mode or another mode: keys would go to tmux, not the host


class Watch:
    """What the waker saw of a pane (memory only): the screen's digest and when it last changed."""

    def __init__(self) -> None:
        self.digest: str | None = None
        self.changed_at = 0.0  # trio time
        self.gone_at: float | None = None
        self.lock = trio.Lock()


def _key(m: dict[str, Any]) -> str:
    """A pending message as a wake-up remembers it (an overdue ack is a new reason to wake)."""
    return f"{m['message_id']} overdue" if m.get("overdue") else str(m["message_id"])


class Pane:
    """Where an agent's host runs: a tmux socket and a pane id, and what the waker did last."""

    def __init__(
        self, socket: str, pane: str, enabled: bool = True, prompt: str = "", last: dict[str, Any] | None = None
    ):
        self.socket = socket
        self.pane = pane
        self.enabled = enabled
        self.prompt = prompt
        self.last: dict[str, Any] = last or {}  # {"at", "result", "woke_for"?, "messages"?}

    def __repr__(self) -> str:
        return f"Pane({self.to_dict()!r})"

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
        watch_s: float = WATCH_S,
    ):
        self._read = read
        self._flush = flush_delivered
        self._file = Path(state_file)
        self._tmux = tmux
        self.idle_s = idle_s
        self.retry_s = retry_s
        self.watch_s = watch_s
        self.panes: dict[str, Pane] = self._load()
        self._watches: dict[str, Watch] = {}
        self._kicked: set[str] = set()
        self._busy: set[str] = set()
        self._kick = trio.Event()
        self.woken = 0
        self.looks = 0  # looks at panes answered, and decisions taken (for tests)
        self.decisions = 0

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
        p = Pane(socket, pane, old.enabled if old else True, old.prompt if old else "")
        if old and (old.socket, old.pane) == (socket, pane):
            p.last = old.last  # the same session's start hook again (a resumed session)
        self.panes[agent] = p
        self._watches.pop(agent, None)
        await trio.to_thread.run_sync(self._save)
        log.info("tmux pane of @%s: %s on %s", agent, pane, socket)
        if p.enabled:
            await self._observe(agent, p)  # the pane's quiet period is measured from now
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
    def on_applied(self, applied: list[dict[str, Any]], source: str) -> None:
        """A writer subscriber: a new message may be one that must not wait."""
        if any(d["type"] in ("message.create", "message.unread") for d in applied):
            watched = [a for a, p in self.panes.items() if p.enabled and p.pane]
            if watched:  # no pane watched: no task woken for each message sent
                self._kicked.update(watched)
                self._kick.set()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_panes)
            task_status.started()
            while True:
                await self._kick.wait()
                self._kick = trio.Event()
                kicked = self._kicked - self._busy  # a busy one is kicked again when its task ends
                self._kicked -= kicked
                for agent in sorted(kicked):
                    self._busy.add(agent)
                    nursery.start_soon(self._handle, agent)

    async def _watch_panes(self) -> None:
        """Look at every watched pane every `WATCH_S`, so that a message finds its quiet period measured."""
        while True:
            await trio.sleep(self.watch_s)
            now = trio.current_time()
            for agent, p in list(self.panes.items()):
                w = self._watches.get(agent)
                if not p.enabled or not p.pane:
                    continue
                if w is not None and w.gone_at is not None and now - w.gone_at < GONE_S:
                    continue
                try:
                    await self._observe(agent, p)
                except Exception:  # never let watching take the daemon down
                    log.exception("looking at the tmux pane of @%s failed", agent)

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
        woke_for = set(p.last.get("woke_for") or ())
        if woke_for and woke_for <= {_key(m) for m in found["messages"]}:
            return self._decide(agent, p, "already woken in this quiet period", again=False)
        look = await self._observe(agent, p)
        if look is None:
            return self._decide(agent, p, "pane gone", again=False)
        if any(time.time() - k < self.idle_s for k in look.keystrokes):
            return self._decide(agent, p, "keystrokes", again=True)
        if look.in_mode:
            return self._decide(agent, p, "copy mode", again=True)
        if trio.current_time() - self._watches[agent].changed_at < self.idle_s:
            return self._decide(agent, p, "active", again=True)
        state = prompt_state(look.screen, p.prompt or DEFAULT_PROMPT_RE)
        if state != "empty":
            return self._decide(agent, p, "typing" if state == "typing" else "no prompt", again=True)
        n = int(found.get("total") or len(found["messages"]))
        text = PROMPT.format(n=n, s="" if n == 1 else "s")
        typed = ("send-keys", "-t", p.pane, "-l", text, ";", "send-keys", "-t", p.pane, "Enter")  # one tmux call
        if not await self._tmux_ok(p.socket, *typed):
            return self._decide(agent, p, "pane gone", again=False)
        self.woken += 1
        self.decisions += 1
        p.last = {
            "at": ev.now_rfc3339(),
            "result": "woken",
            "messages": n,
            "woke_for": sorted(_key(m) for m in urgent),
        }
        await trio.to_thread.run_sync(self._save)
        log.info("woke @%s in tmux pane %s for %d message(s)", agent, p.pane, n)
        return False

    def _decide(self, agent: str, p: Pane, why: str, *, again: bool) -> bool:
        self.decisions += 1
        if p.last.get("result") != why:
            log.info("not waking @%s (pane %s): %s", agent, p.pane, why)
        woken = {k: p.last[k] for k in ("woke_for", "messages") if p.last.get(k)}  # the last wake-up's facts stay
        p.last = {"at": ev.now_rfc3339(), "result": why, **woken}
        return again

    # ------------------------------------------------------------------ tmux
    async def _observe(self, agent: str, p: Pane) -> Look | None:
        """Look at ``agent``'s pane and note whether its screen changed (and when)."""
        w = self._watches.setdefault(agent, Watch())
        async with w.lock:  # one look at a time: looks finishing out of order would fake changes
            look = await self._look(p)
            now = trio.current_time()
            if look is None:
                w.digest, w.gone_at = None, now
                return None
            w.gone_at = None
            if look.digest != w.digest:
                w.digest, w.changed_at = look.digest, now
            return look

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

    async def _look(self, p: Pane) -> Look | None:
        """The pane's screen, cursor, mode and its session's clients' last keystrokes; None when it is gone."""
        code, out = await self._run(
            p.socket,
            "display-message", "-p", "-t", p.pane, "#{pane_in_mode} #{cursor_x},#{cursor_y}",
            ";", "list-clients", "-t", p.pane, "-F", "#{client_activity}",
            ";", "display-message", "-p", _SCREEN,
            ";", "capture-pane", "-p", "-t", p.pane,
        )  # fmt: skip
        self.looks += 1  # counted once tmux answered: a test that waits for a look waits for its result
        head, sep, screen = out.partition(_SCREEN + "\n")
        lines = head.split("\n")
        if code != 0 or not sep or not lines[0]:
            return None
        mode, _, cursor = lines[0].partition(" ")
        try:
            keystrokes = [float(x) for x in lines[1:] if x.strip()]
        except ValueError:
            return None
        digest = hashlib.blake2b(f"{cursor}\n{screen}".encode(), digest_size=16).hexdigest()
        return Look(screen, digest, keystrokes, mode.strip() not in ("", "0"))
