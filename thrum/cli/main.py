"""The ``thrum`` command: the click group, lazy command registry, and `main()`.

Rules:

1. Commands live in their own modules and are imported only when invoked
   (startup time is part of the product: ``thrum send`` must start fast).
   Registering a command is one line in `COMMANDS`: ``"name": "module:attr"``.
2. `main()` is the only place errors become exit codes: success 0; a
   `ThrumError` (or any other failure) prints one line ``thrum: <message>`` on
   stderr and exits 1; a usage error prints one line and exits 2; Ctrl-C
   exits 130. Never a traceback, unless ``--verbose`` or ``THRUM_DEBUG=1``.
3. With ``--json`` an error is one JSON object on stdout instead,
   ``{"error": {"code", "message", "data"}}`` (the daemon's RPC error when there
   is one), with the same exit status; nothing is written to stderr.
4. A mistyped command names the closest existing ones (``thrum inbx`` → inbox).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from typing import Any

import click

from .. import envflags, errors
from ..errors import ThrumError
from .common import CONTEXT_SETTINGS, Options, global_options

# name -> "module:attribute". Keep the order: it is the order of `thrum --help`.
COMMANDS: dict[str, str] = {
    "init": "thrum.cli.init:init",
    "quickstart": "thrum.cli.agent:quickstart",
    "whoami": "thrum.cli.agent:whoami",
    "send": "thrum.cli.send:send",
    "reply": "thrum.cli.send:reply",
    "inbox": "thrum.cli.inbox:inbox",
    "sent": "thrum.cli.message:sent",
    "search": "thrum.cli.search:search",
    "ack": "thrum.cli.message:ack",
    "message": "thrum.cli.message:message",
    "thread": "thrum.cli.thread:thread",
    "group": "thrum.cli.group:group",
    "agent": "thrum.cli.agent:agent",
    "session": "thrum.cli.session:session",
    "daemon": "thrum.cli.daemon_cmd:daemon",
    # Added by other issues (one line each):
    "sync": "thrum.cli.sync:sync",
    "wait": "thrum.cli.wait:wait",
    "gc-mail": "thrum.cli.gcmail:gc_mail",
    "doctor": "thrum.cli.doctor:doctor",
    "ui": "thrum.cli.ui:ui",
    "mcp": "thrum.cli.mcp:mcp",
    "setup": "thrum.cli.setup:setup",
    "wake": "thrum.cli.wake:wake",
    "hook": "thrum.cli.hook:hook",
    "team": "thrum.cli.team:team",
    "verify": "thrum.cli.verify:verify",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        extra = [n for n in super().list_commands(ctx) if n not in self.lazy]
        return list(self.lazy) + sorted(extra)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            return self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, cmd_name: str) -> click.Command:
        module_name, _, attr = self.lazy[cmd_name].partition(":")
        module = importlib.import_module(module_name)
        cmd = getattr(module, attr)
        if not isinstance(cmd, click.Command):
            raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
        return cmd


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="thrum", prog_name="thrum", message="%(prog)s %(version)s")
@global_options()
@click.pass_context
def cli(ctx: click.Context) -> None:
    """thrum: a Git-native message bus for AI coding agents.

    \b
    Start here:
      thrum init                                    set up thrum in this git repository
      thrum quickstart --name alice --role implementer --module auth
      thrum send "Tests are green" --to @reviewer
      thrum inbox

    Global flags (--json --quiet --verbose --role --module --name --repo) can be
    given before or after the subcommand.
    """
    ctx.ensure_object(Options)


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip()) or "error"


def _error_text(exc: ThrumError) -> str:
    text = _one_line(exc.message or str(exc))
    data = exc.data if isinstance(exc.data, dict) else {}
    matches = data.get("close_matches")
    if matches and isinstance(matches, list) and not any(str(m) in text for m in matches):
        text += " (did you mean: " + ", ".join(f"@{str(m).lstrip('@')}" for m in matches) + "?)"
    return text


def _debugging(argv: list[str]) -> bool:
    return envflags.flag(envflags.DEBUG) or "--verbose" in argv or "-v" in argv


def _json_requested(argv: list[str], opts: Options) -> bool:
    if opts.json:
        return True
    head = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in head


class _Reporter:
    """Writes the one error report of a failed invocation: a stderr line, or with
    ``--json`` one JSON object on stdout."""

    def __init__(self, as_json: bool):
        self.as_json = as_json

    def fail(
        self, message: str, status: int, *, code: int = errors.INTERNAL_ERROR, data: dict[str, Any] | None = None
    ) -> int:
        try:
            if self.as_json:
                sys.stdout.write(
                    json.dumps({"error": {"code": code, "message": message, "data": data or {}}}, ensure_ascii=False)
                    + "\n"
                )
                sys.stdout.flush()
            else:
                sys.stderr.write(f"thrum: {message}\n")
                sys.stderr.flush()
        except OSError:
            pass
        return status


_NO_SUCH_COMMAND = re.compile(r"No such command '([^']*)'")


def _closest_commands(exc: click.UsageError) -> list[str]:
    """For "No such command 'inbx'": the group's commands that look like it."""
    found = _NO_SUCH_COMMAND.search(exc.format_message())
    ctx = exc.ctx
    if not found or ctx is None or not isinstance(ctx.command, click.Group):
        return []
    import difflib  # only a mistyped command pays for it (and heapq): ~1 ms of every start

    typed = found.group(1)
    names = ctx.command.list_commands(ctx)
    close = [n for n in names if n.startswith(typed)] if len(typed) >= 2 else []
    for n in difflib.get_close_matches(typed, names, n=3, cutoff=0.6):
        if n not in close:
            close.append(n)
    return close[:3]


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code (`main` exits with it)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = Options()
    out = _Reporter(False)
    try:
        out.as_json = _json_requested(argv, opts)
        status = cli.main(args=argv, prog_name="thrum", standalone_mode=False, obj=opts)
        sys.stdout.flush()
        # non-standalone click returns the code of a `ctx.exit(n)` (e.g. `daemon status`: 3)
        return status if isinstance(status, int) and not isinstance(status, bool) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        # `thrum` or `thrum message` alone: show that command's help (as click does).
        sys.stderr.write(exc.format_message().rstrip("\n") + "\n")
        return 2
    except click.UsageError as exc:
        out.as_json = _json_requested(argv, opts)
        return _usage_error(out, exc)
    except click.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):
            return out.fail("interrupted", 130)
        return out.fail("aborted", 1)
    except click.ClickException as exc:
        return out.fail(_one_line(exc.format_message()), exc.exit_code or 1)
    except ThrumError as exc:
        out.as_json = _json_requested(argv, opts)
        return _thrum_error(out, exc, argv)
    except KeyboardInterrupt:
        return out.fail("interrupted", 130)
    except BrokenPipeError:
        _silence_stdout()
        return 1
    except Exception as exc:  # the last line of defence: never a traceback unless asked
        if _debugging(argv):
            import traceback

            traceback.print_exc()
        return out.fail(
            f"internal error: {type(exc).__name__}: {_one_line(str(exc))} (rerun with --verbose for details)", 1
        )


def _silence_stdout() -> None:
    """stdout went away (`thrum inbox | head -1`): stop quietly (what is left to flush goes nowhere)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


def _usage_error(out: _Reporter, exc: click.UsageError) -> int:
    """A usage error's one line (exit 2): the closest commands to one mistyped, or where the help is."""
    close = _closest_commands(exc)
    text = _one_line(exc.format_message())
    if close:  # click suggests for some groups itself; say it once, our way
        said = _NO_SUCH_COMMAND.search(text)
        text = (said.group(0) if said else text) + " (did you mean " + " or ".join(f"'{n}'" for n in close) + "?)"
    elif exc.ctx is not None and "--help" not in exc.format_message():
        text += f" (see '{exc.ctx.command_path} --help')"
    data = {"usage": True, **({"close_matches": close} if close else {})}
    return out.fail(text, 2, code=errors.INVALID_PARAMS, data=data)


def _thrum_error(out: _Reporter, exc: ThrumError, argv: list[str]) -> int:
    """A thrum error's line (exit 1): its message with --json, else the text that also says what to do."""
    if _debugging(argv):
        import traceback

        traceback.print_exc()
    data = exc.data if isinstance(exc.data, dict) else None
    if out.as_json:
        return out.fail(_one_line(exc.message or str(exc)), 1, code=exc.code, data=data)
    return out.fail(_error_text(exc), 1)


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))


if __name__ == "__main__":  # pragma: no cover
    main()
