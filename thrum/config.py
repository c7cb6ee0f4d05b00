"""Settings from ``.thrum/config.json`` with environment overrides.

Environment wins over the file so cron lines and tests can change one run
without editing state. Unknown keys are kept (forward compatibility) and reported
(`unknown_keys`: a warning on every command, a WARN in ``thrum doctor``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from . import envflags
from .errors import ValidationError

DEFAULTS: dict[str, Any] = {
    "sync_interval": 60.0,  # s between looks at the remote's tip when idle (daemon/pace.py)
    "sync_debounce": 0.2,  # seconds after a write before a sync (a burst of writes batches up)
    "sync_active_interval": 1.0,  # s between tip checks while a conversation goes on (daemon/pace.py)
    "sync_active_window": 120.0,  # s a local write or a received event keeps that pace
    "presence_interval": 60.0,  # s; at most one agent.heartbeat per agent seen (daemon/presence.py); 0: none
    "remote": "origin",
    "local_only": False,
    "ws_port": 9999,
    "ws_queue_size": 100,
    "ui_port": 9998,  # preferred Web UI port (`thrum ui`); taken: any free port
    "max_body_bytes": 1024 * 1024,
    "ssh_key": None,
    "https_username": None,
    # client connections (thrum/daemon/limits.py): both transports together
    "max_connections": 1000,  # fitted under the descriptor limit at start-up
    "max_requests_in_flight": 32,  # per connection; reading pauses beyond it
    "max_buffered_bytes": 256 * 1024 * 1024,  # unfinished and unanswered requests, all clients
    "idle_timeout": 600.0,  # s; a connection with nothing in flight and no subscription
    "request_timeout": 30.0,  # s; to finish sending a request once it started
    "send_timeout": 30.0,  # s; for a client to read a reply or notification
    "net_timeout": 60.0,  # s; a git remote may stay silent before a sync gives up
    "max_sync_intake_bytes": 256 * 1024 * 1024,  # log-file bytes one sync may read from the remote (replicate)
    "trusted_remote_paths": [],  # path remotes another user may own (thrum.sync.transport.pathremote)
    "clock_skew": 600.0,  # s; events dated further ahead of this clock wait until then (trust.md)
    "tidy_detach": True,  # an offline sync's full repack runs in a child it leaves behind (sync/fullrepack.py)
}

# Tuning read where it is used, with the default beside it (daemon/limits.py, hub.py, ws.py).
READ_WHERE_USED = frozenset({"max_batch", "subscription_ring_size", "subscription_ring_bytes", "ws_max_frame_bytes"})
KNOWN_KEYS = frozenset(DEFAULTS) | READ_WHERE_USED

POSITIVE = (
    "max_sync_intake_bytes",
    "max_connections",
    "max_requests_in_flight",
    "max_buffered_bytes",
    "idle_timeout",
    "request_timeout",
    "send_timeout",
    "clock_skew",
    "sync_active_interval",
)

ENV: dict[str, tuple[str, Callable[[str], Any]]] = {
    "THRUM_SYNC_INTERVAL": ("sync_interval", float),
    "THRUM_SYNC_DEBOUNCE": ("sync_debounce", float),
    "THRUM_SYNC_ACTIVE_INTERVAL": ("sync_active_interval", float),
    "THRUM_SYNC_ACTIVE_WINDOW": ("sync_active_window", float),
    "THRUM_PRESENCE_INTERVAL": ("presence_interval", float),
    "THRUM_REMOTE": ("remote", str),
    envflags.LOCAL: ("local_only", envflags.is_on),
    "THRUM_WS_PORT": ("ws_port", int),
    "THRUM_WS_QUEUE": ("ws_queue_size", int),
    "THRUM_UI_PORT": ("ui_port", int),
    "THRUM_MAX_BODY": ("max_body_bytes", int),
    "THRUM_SSH_KEY": ("ssh_key", str),
    "THRUM_NET_TIMEOUT": ("net_timeout", float),
    "THRUM_CLOCK_SKEW": ("clock_skew", float),
    "THRUM_TIDY_DETACH": ("tidy_detach", envflags.is_on),
}

# Variables `thrum sync` (and `thrum doctor`) pass along with their request, so a daemon
# started earlier (or by another shell) logs in with what the caller has for that one
# sync: a token, an ssh-agent, a key file. An explicit allow-list of values that are
# logins, never a variable that names a config file, a program or a path to execute
# (GIT_CONFIG_*, XDG_CONFIG_HOME, HOME, PATH, GIT_ASKPASS, SSH_ASKPASS, GIT_SSH*,
# DBUS_SESSION_BUS_ADDRESS, whose "unixexec:" form runs a program): with those, a
# caller would choose what `git credential` runs (docs/design/remotes.md). The daemon
# takes them only from its own user's CLI over the Unix socket and keeps nothing.
FORWARDED_ENV = (
    "THRUM_GIT_TOKEN",
    "THRUM_GIT_USERNAME",
    "THRUM_SSH_KEY",  # a key file libssh2 reads (never runs)
    "SSH_AUTH_SOCK",  # the ssh-agent's socket
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
)


def forwarded_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `FORWARDED_ENV` variables set in ``environ`` (this process's by default)."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in FORWARDED_ENV if env.get(name)}


@dataclass
class Config:
    values: dict[str, Any] = field(default_factory=lambda: dict(DEFAULTS))

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None


def load(path: Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """Read the config file (missing is fine) and apply environment overrides.

    Raises:
        ValidationError: the file is not a JSON object, or a value has the wrong type.
    """
    values = dict(DEFAULTS)
    if path is not None and path.is_file():
        values.update(_read_file(path))
    _apply_environment(values, os.environ if environ is None else environ)
    _check(values)
    return Config(values)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text() or "{}")
    except ValueError as exc:
        raise ValidationError(f"{path}: not valid JSON ({exc})", field="config") from None
    if not isinstance(data, dict):
        raise ValidationError(f"{path}: must hold a JSON object", field="config")
    return data


def _apply_environment(values: dict[str, Any], env: Mapping[str, str]) -> None:
    for var, (key, conv) in ENV.items():
        if env.get(var) not in (None, ""):
            try:
                values[key] = conv(env[var])
            except ValueError:
                raise ValidationError(f"{var}={env[var]!r} is not a valid {key}", field=var) from None


def _check(values: dict[str, Any]) -> None:
    for key in ("sync_interval", "sync_debounce", "sync_active_window", "presence_interval"):
        if not _is_number(values[key]) or values[key] < 0:
            raise ValidationError(f"config {key} must be a non-negative number", field=key)
    for key in POSITIVE:
        if not _is_number(values[key]) or not values[key] > 0 or values[key] > 2**53:
            raise ValidationError(f"config {key} must be a positive number", field=key)
    trusted = values["trusted_remote_paths"]
    if not isinstance(trusted, list) or not all(isinstance(p, str) for p in trusted):
        raise ValidationError(
            'config trusted_remote_paths must be a list of paths (or "*")', field="trusted_remote_paths"
        )
    if not isinstance(values["tidy_detach"], bool):
        raise ValidationError("config tidy_detach must be true or false", field="tidy_detach")
    if not isinstance(values["net_timeout"], (int, float)) or values["net_timeout"] <= 0:
        raise ValidationError("config net_timeout must be a positive number of seconds", field="net_timeout")


def unknown_keys(path: Path | None) -> list[str]:
    """Keys of the config file thrum does not know (a typo, or a newer version's): kept,
    never used, and reported (a warning on every command, a WARN in ``thrum doctor``)."""
    if path is None or not path.is_file():
        return []
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return []
    return sorted(str(k) for k in data if k not in KNOWN_KEYS) if isinstance(data, dict) else []


def unknown_keys_text(keys: list[str]) -> str:
    """One line naming the unknown keys, each with the known key it is closest to."""
    import difflib

    parts = []
    for key in keys:
        close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1)
        parts.append(f"{key[:60]!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"unknown key(s) in .thrum/config.json, ignored: {', '.join(parts)}"


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def save(path: Path, updates: dict[str, Any]) -> None:
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text() or "{}")
        except ValueError:
            data = {}
    data.update(updates)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
