"""``thrum doctor``: is this repository's thrum set-up healthy, and what to do if not."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..errors import ThrumError
from .common import CONTEXT_SETTINGS, global_options, runtime

if TYPE_CHECKING:
    from ..paths import ThrumPaths

NEEDS_ACTION = ("warn", "fail")
DOCTOR_TIMEOUT_S = 300  # the remote check may wait for the network timeout and a credential helper


def _check(name: str, status: str, detail: str, action: str | None = None) -> dict[str, Any]:
    return {"check": name, "status": status, "detail": detail, "action": action}


def _uptime(seconds: float | None) -> str:
    s = int(seconds or 0)
    return f"{s // 3600} h {s % 3600 // 60} min" if s >= 3600 else f"{s // 60} min {s % 60} s" if s >= 60 else f"{s} s"


@click.command(context_settings=CONTEXT_SETTINGS)
@global_options()
def doctor() -> None:
    """Check the set-up and say, one line each, what to do about anything wrong.

    \b
    Checks: .thrum/ is this user's own (not tracked by git, not another user's);
    the daemon and its socket; the sync worktree and branch a-sync; the
    remote, whether it answers and which login it took (THRUM_GIT_TOKEN, git's
    credential helper, ssh-agent, a key file); the database against the log; the
    search index against the messages (rebuilt when it disagrees); lines
    quarantined from the log; local events not pushed yet; sizes.
    Exits 1 when something needs action (a WARN or FAIL line).
    """
    from .. import lifecycle
    from ..config import forwarded_env
    from ..ownership import state_problem
    from ..paths import resolve

    rt = runtime()
    unchecked = resolve(rt.opts.repo, check=False)
    problem = state_problem(unchecked)
    if problem is not None:  # nothing else is read from state that is not the user's own
        refused = [
            _check("state", "fail", problem, "fix that first: thrum refuses every command until then"),
            _check("other", "skip", "not checked: the state in .thrum/ is not this user's own"),
        ]
        rt.emit({"ok": False, "checks": refused}, lambda: _text(refused))
        raise click.exceptions.Exit(1)
    paths = rt.require_init()
    checks: list[dict[str, Any]] = []
    from_daemon = None
    if lifecycle.is_running(paths):
        try:
            info = lifecycle.call(paths, "daemon.status", timeout=10)
            checks.append(
                _check(
                    "daemon",
                    "ok",
                    f"running (pid {info.get('pid')}, thrum {info.get('version')}, up {_uptime(info.get('uptime'))})",
                )
            )
            checks.append(_check("socket", "ok", f"{paths.socket} answers"))
            from_daemon = rt.call("doctor.run", {"env": forwarded_env()}, autostart=False, timeout=DOCTOR_TIMEOUT_S)[
                "checks"
            ]
        except (ThrumError, OSError) as exc:
            checks.append(
                _check(
                    "daemon",
                    "fail",
                    f"running (pid {lifecycle.read_pid(paths)}) but does not answer on {paths.socket}: {exc}",
                    "restart it: `thrum daemon restart` (its log: .thrum/var/daemon.log)",
                )
            )
    else:
        checks.append(
            _check(
                "daemon",
                "warn",
                "not running: nothing syncs on its own and no one is notified",
                "start it with `thrum daemon start` (commands that need it also start it)",
            )
        )
        checks.append(_check("socket", "info", f"nobody listens on {paths.socket}"))
    if from_daemon is not None:
        checks.extend(from_daemon)
    else:
        from ..sync.offline import doctor_checks

        checks.extend(doctor_checks(paths))
        checks.append(_check("projection", "skip", "not checked: the daemon is not running"))
    checks.append(_check("state", "ok", f"{paths.thrum_dir} is this user's own, and git tracks none of it"))
    checks.append(_config_check(paths))
    result = {"ok": not any(c["status"] in NEEDS_ACTION for c in checks), "checks": checks}
    rt.emit(result, lambda: _text(checks))
    if not result["ok"]:
        raise click.exceptions.Exit(1)


def _config_check(paths: ThrumPaths) -> dict[str, Any]:
    from ..config import unknown_keys, unknown_keys_text

    unknown = unknown_keys(paths.config)
    if unknown:
        return _check("config", "warn", unknown_keys_text(unknown), "fix or remove them in .thrum/config.json")
    return _check("config", "ok", "every key of .thrum/config.json is known")


def _text(checks: list[dict[str, Any]]) -> str:
    lines = []
    for c in checks:
        mark = c["status"].upper() if c["status"] in NEEDS_ACTION else c["status"]
        line = f"{mark:<5} {c['check']:<11} {c['detail']}"
        if c.get("action"):
            line += f"  -> {c['action']}"
        lines.append(line)
    return "\n".join(lines)


__all__ = ["doctor"]
