"""``thrum hook HOST EVENT``: the command a host runs at its turn boundaries.

It reads the host's JSON from stdin and makes one call (``message.pending`` with
``surface_via``): the daemon frames what is waiting for this agent as untrusted
data (`thrum.framing`) and records what it framed in full as surfaced; the hook
prints it the way the host's contract wants (`thrum.hooks.hosts`). Hosts run it
on every prompt, tool call and stop, so start-up is the cost: this module imports
the RPC client and path finding, no click, no trio (``thrum`` reaches it before
importing the CLI: `thrum.cli.entry`).

Rules:

1. A hook never breaks its host. Whatever goes wrong (no daemon, no identity, bad
   stdin, a daemon error, a timeout) it exits 0 within `BUDGET` seconds, prints
   nothing, and writes the reason to ``.thrum/var/hooks.log`` (`thrum.hooks.hooklog`).
   It never starts the daemon: that would not fit a hook's budget (the MCP server
   the host starts does).
2. The agent is ``--agent NAME`` (what `thrum setup` writes), else the identity
   rules (`thrum.identity`: ``THRUM_NAME``, …) in the repository of the hook's
   ``cwd`` (Cursor: its first workspace root), else of the working directory.
3. Each message is shown once: the daemon hands out only messages never surfaced
   to the agent, and records as surfaced those it framed in full, in the same call
   (one round trip, one durable write: docs/design/hooks.md, "Fast"). An ack that
   is overdue comes back once, one priority higher.
4. At a stop, the hook blocks only for a message that must not wait (a direct
   mention, high or critical priority, an ack asked for or overdue), and never
   when this stop follows a block.
5. Only ``thrum hook`` alone or ``--help`` prints usage; nothing else writes to
   stderr or exits non-zero.
"""

from __future__ import annotations

import json
import os
import sys

from .. import errors
from ..client import Client
from ..paths import ThrumPaths, resolve
from . import hooklog, hosts

TYPE_CHECKING = False  # typing is not imported: the hook's start-up budget (mypy reads this as True)
if TYPE_CHECKING:
    from typing import Any, BinaryIO

BUDGET = 5.0  # seconds for every daemon call of one hook
PENDING_LIMIT = 25  # messages asked for at once: full bodies within the frame's budget, a digest of the rest
MAX_STDIN = 4 * 1024 * 1024  # a host's payload (Claude Code sends a tool's whole input and output)

USAGE = """usage: thrum hook HOST EVENT [--agent NAME]

Run by an agent host at its turn boundaries: puts the thrum messages waiting for
the agent into its context, framed as data from other agents. Set it up with
`thrum setup HOST`. Reads the host's JSON on stdin; never fails the host (problems
go to .thrum/var/hooks.log).

  claude   SessionStart | UserPromptSubmit | PostToolUse | Stop
  codex    SessionStart | UserPromptSubmit | PostToolUse | Stop | notify
  gemini   SessionStart | BeforeAgent | AfterTool | AfterAgent
  cursor   sessionStart | postToolUse | stop
  generic  start | prompt | stop          (plain text, for any harness)
"""


class Skip(Exception):
    """Nothing to print, for a reason worth a line in the log."""


def _args(argv: list[str]) -> tuple[str, str, str | None, str | None]:
    rest, agent, repo = [], None, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--agent", "--repo") and i + 1 < len(argv):
            if a == "--agent":
                agent = argv[i + 1]
            else:
                repo = argv[i + 1]
            i += 2
            continue
        if a.startswith("--agent="):
            agent = a.split("=", 1)[1]
        elif a.startswith("--repo="):
            repo = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    if len(rest) < 2:
        raise Skip(f"expected HOST EVENT, got {' '.join(argv)[:200]!r}")
    return rest[0], rest[1], agent, repo


def _payload(host: str, event: str, argv: list[str], stdin: BinaryIO | None) -> dict[str, Any]:
    """The host's JSON: stdin, or (Codex's notify) the last argument."""
    if host == "codex" and event == "notify":
        raw = argv[-1].encode("utf-8", "replace") if argv and argv[-1].startswith("{") else b""
    elif stdin is None or (hasattr(stdin, "isatty") and stdin.isatty()):
        raw = b""
    else:
        raw = stdin.read(MAX_STDIN + 1)
        if isinstance(raw, str):
            raw = raw.encode("utf-8", "replace")
        if len(raw) > MAX_STDIN:
            raise Skip(f"stdin is larger than {MAX_STDIN} bytes")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise Skip(f"stdin is not JSON ({str(exc)[:100]})") from None
    if not isinstance(data, dict):
        raise Skip("stdin is not a JSON object")
    return data


def _agent_name(paths: ThrumPaths, agent: str | None) -> str:
    if agent:
        return agent
    from .. import identity

    return identity.resolve(paths.identities, worktree=str(paths.repo)).name


class Hook:
    """One invocation: the daemon connection and the acting agent."""

    def __init__(self, paths: ThrumPaths, agent: str):
        self.paths = paths
        self.agent = agent
        self.client = Client(paths, timeout=BUDGET)

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        params = {"caller": self.agent, **params}
        result: dict[str, Any]
        try:
            result = self.client.call(method, params)
        except errors.IdentityError:  # the daemon lost the agent (a rebuilt view, a fresh clone): register, retry
            self.client.call("agent.register", _register_params(self.paths, self.agent))
            result = self.client.call(method, params)
        return result

    def close(self) -> None:
        self.client.close()


def _register_params(paths: ThrumPaths, agent: str) -> dict[str, Any]:
    from .. import identity
    from ..paths import worktree_name

    ident = identity.load(paths.identities / f"{agent}.json")
    params = {"name": ident.name, "role": ident.role, "worktree": worktree_name(paths.repo)}
    for key in ("module", "display"):
        if getattr(ident, key):
            params[key] = getattr(ident, key)
    return params


def respond(host: str, event: str, payload: dict[str, Any], hook: Hook, stdout: BinaryIO) -> tuple[str, list[str]]:
    """Print what is waiting, as the host wants it; returns (what happened, ids shown in full).

    One call: the daemon frames what is waiting and records what it framed in full
    as surfaced, in one durable write with the delivered receipts it depends on.
    """
    role = hosts.role(host, event)
    if role == "stop" and hosts.follows_a_block(host, payload):
        return "stop follows a block: let through", []
    if role == "start":
        _remember_pane(hook)
    if role == "notify":
        return "notified", []
    got = hook.call(
        "message.pending",
        {"limit": PENDING_LIMIT, "surface_via": hosts.via(host, event), "urgent_only": role == "stop"},
    )
    text, shown, total = str(got.get("text") or ""), list(got.get("shown") or []), int(got.get("total") or 0)
    if role == "stop" and not got.get("urgent"):
        return f"stop: {total} waiting, none urgent", []
    out = hosts.output(host, role or "context", event, text)
    if not out:
        return "nothing new", []
    stdout.write(out)
    stdout.flush()
    return f"{role}: showed {len(shown)} of {total}", shown


def _remember_pane(hook: Hook) -> None:
    """Tell the daemon which tmux pane this agent's session runs in (idle wake-ups); best effort."""
    pane, tmux = os.environ.get("TMUX_PANE"), os.environ.get("TMUX")
    if pane and tmux:
        try:
            hook.call("agent.pane", {"pane": pane, "tmux": tmux})
        except errors.ThrumError as exc:
            hooklog.write(hook.paths, f"could not record the tmux pane: {exc.message}")


def _bytes_of(stream: Any) -> BinaryIO:
    """The byte stream under a text one (itself when it has none: a test's stand-in)."""
    binary: BinaryIO = getattr(stream, "buffer", stream)
    return binary


def run(argv: list[str], *, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Run ``thrum hook`` with ``argv`` (after ``hook``); returns the exit status (0 but for usage)."""
    stdin = stdin if stdin is not None else _bytes_of(sys.stdin)
    stdout = stdout if stdout is not None else _bytes_of(sys.stdout)
    if not argv or argv[0] in ("-h", "--help", "help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else 2
    paths = None
    hook = None
    where = " ".join(argv[:2])
    try:
        host, event, agent, repo = _args(argv)
        where = f"{host} {event}"
        if hosts.role(host, event) is None:
            raise Skip(f"unknown host or event {where!r} (see `thrum hook --help`)")
        payload = _payload(host, event, argv, stdin)
        paths = resolve(repo or hosts.cwd_of(host, payload) or None)
        if not paths.initialized:
            raise Skip(f"thrum is not set up in {paths.repo}")
        hook = Hook(paths, _agent_name(paths, agent))
        what, shown = respond(host, event, payload, hook, stdout)
        if shown:
            hooklog.write(paths, f"{where} @{hook.agent}: {what}")
        return 0
    except Skip as exc:
        hooklog.write(paths or _here(), f"{where}: {exc}")
    except errors.ThrumError as exc:
        hooklog.write(paths or _here(), f"{where}: {type(exc).__name__}: {exc.message or exc}")
    except (OSError, ValueError) as exc:
        hooklog.write(paths or _here(), f"{where}: {type(exc).__name__}: {exc}")
    except Exception as exc:  # never a traceback in the host
        hooklog.write(paths or _here(), f"{where}: internal error {type(exc).__name__}: {exc}")
    finally:
        if hook is not None:
            hook.close()
    return 0


def _here() -> ThrumPaths | None:
    """The working directory's repository, for the log of a hook that failed before finding its own."""
    try:
        return resolve(None)
    except Exception:
        return None


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(sys.argv[2:] if argv is None else argv))
