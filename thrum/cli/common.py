"""What every command shares: the global flags, and a `Runtime` that turns them
into paths, an identity, a daemon connection and output.

Rules:

1. The global flags (``--json --quiet --verbose --role --module --name --repo``)
   are accepted before or after the subcommand: `global_options` adds them to
   every group and command. Each occurrence writes into one `Options` object on
   the root context, so a later (more specific) value wins; flags are sticky.
2. A command is: parse → `rt = runtime()` → one RPC (`rt.call` / `rt.agent_call`)
   → `rt.emit(result, text)`. ``--json`` prints the RPC result on stdout and
   nothing else; hints go through `rt.hint` (silenced by --quiet and --json).
3. Nothing heavy is imported here: paths, identity and client are stdlib-only.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Callable, TypeVar

import click

from ..errors import IdentityError, ThrumError
from ..events.tags import split_tag

if TYPE_CHECKING:
    from ..client import Client
    from ..identity import Identity
    from ..paths import ThrumPaths

F = TypeVar("F", bound=Callable[..., Any])

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class Options:
    """The merged global flags of one invocation (plain class: cheap at start-up)."""

    def __init__(self) -> None:
        self.json = False
        self.quiet = False
        self.verbose = False
        self.role: str | None = None
        self.module: str | None = None
        self.name: str | None = None
        self.repo: str | None = None


def _store(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is None or value is False:
        return value
    opts = ctx.find_root().ensure_object(Options)
    setattr(opts, (param.name or "")[len(_PREFIX) :], value)
    return value


_PREFIX = "global_"  # internal parameter names, so they never clash with a command's own (e.g. NAME)


_GLOBAL = (
    ("json", ("--json",), dict(is_flag=True, help="Print the result as JSON (for scripts).")),
    ("quiet", ("--quiet", "-q"), dict(is_flag=True, help="Suppress hints and notes.")),
    ("verbose", ("--verbose", "-v"), dict(is_flag=True, help="Print debug output (RPC calls, timings) on stderr.")),
    ("role", ("--role",), dict(metavar="ROLE", help="Agent role (or THRUM_ROLE).")),
    ("module", ("--module",), dict(metavar="MODULE", help="Agent module (or THRUM_MODULE).")),
    ("name", ("--name",), dict(metavar="NAME", help="Agent name (or THRUM_NAME).")),
    ("repo", ("--repo",), dict(metavar="PATH", help="Repository path (default: .).")),
)


def identity_option(*decls: str) -> Callable[[F], F]:
    """Decorator adding a flag that names the acting agent, like ``--name`` (e.g. ``search --as NAME``)."""
    return click.option(
        *decls,
        _PREFIX + "as_name",
        metavar="NAME",
        expose_value=False,
        callback=lambda ctx, param, value: _store_name(ctx, value),
        help="Act as this agent (like --name).",
    )


def _store_name(ctx: click.Context, value: str | None) -> None:
    if value:
        ctx.find_root().ensure_object(Options).name = value


def global_options(*, exclude: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Decorator adding the global flags to a command or group.

    ``exclude`` drops flags the command defines itself with another meaning
    (e.g. ``group add --role`` names a member role).
    """

    def deco(f: F) -> F:
        for name, decls, kw in reversed(_GLOBAL):
            if name in exclude:
                continue
            f = click.option(*decls, _PREFIX + name, expose_value=False, callback=_store, **kw)(f)
        return f

    return deco


def options() -> Options:
    ctx = click.get_current_context()
    return ctx.find_root().ensure_object(Options)


# --------------------------------------------------------------------------- parsing helpers


def parse_tag(flag: str, text: str) -> dict[str, Any]:
    """``type:value`` → ``{"type", "value"}``.

    Raises:
        click.UsageError: no colon, or an empty side (exit 2).
    """
    parts = split_tag(text, strip=True)
    if parts is None:
        raise click.UsageError(f"{flag} expects type:value (e.g. module:auth), got {text!r}")
    return {"type": parts[0], "value": parts[1]}


def bare_address(text: str) -> str:
    """``@reviewer`` / ``reviewer`` → ``reviewer``."""
    return text.strip().lstrip("@").strip()


def read_body(text: str | None, body_file: str | None, *, what: str = "message") -> str:
    """The body from an argument, ``-`` (stdin) or ``--body-file``.

    Raises:
        click.UsageError: none or both given.
        ThrumError: the file cannot be read.
    """
    if text is not None and body_file is not None:
        raise click.UsageError(f"give the {what} as an argument or with --body-file, not both")
    if body_file is not None:
        if body_file == "-":
            return sys.stdin.read()
        try:
            with open(body_file, encoding="utf-8") as fh:
                return fh.read()
        except OSError as exc:
            raise ThrumError(f"cannot read --body-file {body_file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ThrumError(f"--body-file {body_file} is not UTF-8 text") from None
    if text is None:
        raise click.UsageError(f"missing {what} text (give it as an argument, - for stdin, or --body-file PATH)")
    if text == "-":
        return sys.stdin.read()
    return text


# --------------------------------------------------------------------------- runtime


class Runtime:
    """Per-invocation state: options → paths, identity, client, output."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self._paths: ThrumPaths | None = None
        self._identity: Identity | None = None
        self._config_checked = False  # unknown config keys are warned about once per command
        self._client: Client | None = None

    # --- where and who

    @property
    def paths(self) -> ThrumPaths:
        if self._paths is None:
            from .. import paths as _paths

            self._paths = _paths.resolve(self.opts.repo)
        return self._paths

    def require_init(self) -> ThrumPaths:
        p = self.paths
        if not p.initialized:
            raise ThrumError(f"no thrum set-up in {p.repo}; run `thrum init` first")
        if not self._config_checked:
            self._config_checked = True
            from ..config import unknown_keys, unknown_keys_text

            unknown = unknown_keys(p.config)
            if unknown and not self.opts.quiet:
                self.warn(unknown_keys_text(unknown))
        return p

    def identity(self) -> Identity:
        if self._identity is None:
            from .. import identity as _identity

            p = self.require_init()
            self._identity = _identity.resolve(
                p.identities, name=self.opts.name, role=self.opts.role, module=self.opts.module, worktree=str(p.repo)
            )
        return self._identity

    def context_flags(self) -> list[tuple[str, str]]:
        """The global flags given on the command line that choose the repository and
        the identity (``--repo``, ``--name``, ``--role``, ``--module``), as typed, for
        a hint to repeat (THRUM_* variables stay in the environment anyway)."""
        return [(key, value) for key in ("repo", "name", "role", "module") if (value := getattr(self.opts, key))]

    @property
    def caller(self) -> str:
        return self.identity().name

    # --- daemon

    def client(self, *, autostart: bool = True) -> Client:
        if self._client is None:
            from .. import lifecycle

            self._client = lifecycle.connect(
                self.require_init(),
                autostart=autostart,
                quiet=self.opts.quiet,
                trace=self.debug if self.opts.verbose else None,
            )
        return self._client

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, autostart: bool = True, timeout: float | None = None
    ) -> Any:
        return self.client(autostart=autostart).call(method, params or {}, timeout=timeout)

    def agent_call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        """`call` as the resolved agent (adds ``caller``).

        When the daemon does not know the agent but its identity file exists (a
        rebuilt database, a fresh clone), register it from the file and retry once.
        """
        ident = self.identity()
        params = {"caller": ident.name, **(params or {})}
        try:
            return self.call(method, params, **kw)
        except IdentityError:
            self.debug(f"daemon does not know @{ident.name}; registering it from its identity file")
            from ..identity import register_params

            self.call("agent.register", register_params(ident, self.paths.repo))
            return self.call(method, params, **kw)

    def best_effort(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """An agent call whose failure must not fail the command (auto mark-as-read)."""
        try:
            return self.agent_call(method, params)
        except (ThrumError, OSError) as exc:
            self.debug(f"{method} failed (ignored): {exc}")
            return None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # --- output

    def emit(self, result: Any, text: str | Callable[[], str] | None) -> None:
        """``--json``: the result; otherwise the text (callable: rendered lazily)."""
        if self.opts.json:
            print_json(result)
            return
        if callable(text):
            text = text()
        if text:
            click.echo(text.rstrip("\n"))

    def echo(self, text: str) -> None:
        if not self.opts.json:
            click.echo(text)

    def hint(self, text: str) -> None:
        if not self.opts.json and not self.opts.quiet:
            click.echo(text)

    def warn(self, text: str) -> None:
        click.echo(f"thrum: warning: {text}", err=True)

    def note(self, text: str) -> None:
        if not self.opts.quiet:
            click.echo(f"thrum: {text}", err=True)

    def debug(self, text: str) -> None:
        if self.opts.verbose:
            click.echo(f"thrum: {text}", err=True)


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str))


def runtime() -> Runtime:
    """The `Runtime` of the current invocation (made once, closed with the root context)."""
    ctx = click.get_current_context()
    root = ctx.find_root()
    rt = root.meta.get("thrum.runtime")
    if rt is None:
        rt = Runtime(root.ensure_object(Options))
        root.meta["thrum.runtime"] = rt
        root.call_on_close(rt.close)
    return rt
