"""Finding, starting and stopping the daemon, and setting up a repository, as every front end needs it.

Front ends (the CLI, the MCP server, the Gas City adapter, the UI) import this
module and `thrum.client`, never `thrum.daemon`: this is the one bridge to the
daemon's process.

Rules:

1. "Is a daemon running?" is answered by the flock the daemon holds, which the
   kernel releases when the process dies however it dies, so a crashed daemon
   never blocks a new one; a stale socket file is removed by the next daemon.
2. Start-up readiness comes through a pipe the daemon writes one JSON line to
   once it listens (no polling); stopping waits on the flock being released.
   Before that line, a daemon that rebuilds its projection (a first start on a
   large history) writes progress lines; each restarts the wait, so the timeout
   measures silence, not the size of the history.
3. `connect` starts the daemon when it is not running, unless ``autostart`` is
   off or the ``THRUM_NO_AUTOSTART`` flag is on (`thrum.envflags`).
4. No trio, no pygit2 at import: `connect` is on every command's start-up path,
   so process control (subprocess, signals, threads) is imported where it is
   used, and set-up (`init_repo`, which needs git) imports `thrum.sync` lazily.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from . import envflags, errors
from .client import DEFAULT_TIMEOUT, Client, Trace
from .paths import ThrumPaths, find_repo_root, resolve

START_TIMEOUT = 60.0


# ---------------------------------------------------------------------------- init


def init_repo(
    repo: str | os.PathLike[str] | None = None,
    *,
    start_daemon: bool = True,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> ThrumPaths:
    """Create ``.thrum/`` and the ``a-sync`` branch + worktree; start the daemon. Idempotent.

    ``on_progress``: told when the remote's log is fetched and how far its checkout is
    (`thrum.sync.worktree.ensure_sync_worktree`), then how far the daemon's first rebuild is
    (`start`).

    Raises:
        NotARepository: ``repo`` is not inside a git repository (nothing is created).
    """
    root = find_repo_root(repo)
    from . import config as config_mod
    from .sync.transport.callbacks import remote_callbacks
    from .sync.transport.credentials import credentials_from_env
    from .sync.worktree import common_dir, ensure_sync_worktree

    common = common_dir(root)
    main_checkout = common.parent if common.name == ".git" else root
    thrum_dir = root / ".thrum"
    if main_checkout.resolve() != root.resolve() and (main_checkout / ".git").exists():
        main_thrum = main_checkout / ".thrum"
        _make_dirs(main_thrum)
        thrum_dir.mkdir(exist_ok=True)
        redirect = thrum_dir / "redirect"
        if not redirect.exists() or redirect.read_text().strip() != str(main_thrum.resolve()):
            redirect.write_text(str(main_thrum.resolve()) + "\n")
        _exclude(common)
        paths = resolve(root)
    else:
        _make_dirs(thrum_dir)
        _exclude(common)
        paths = resolve(root)
    cfg = config_mod.load(paths.config)
    callbacks = None if cfg.local_only else remote_callbacks(credentials_from_env(cfg.values))
    ensure_sync_worktree(paths.main_repo, cfg.remote, callbacks=callbacks, progress=on_progress)
    if start_daemon:
        start(paths, on_progress=on_progress)
    return paths


def _make_dirs(thrum_dir: Path) -> None:
    (thrum_dir / "identities").mkdir(parents=True, exist_ok=True)
    (thrum_dir / "var").mkdir(parents=True, exist_ok=True)
    os.chmod(thrum_dir / "var", 0o700)


def _exclude(common: Path) -> None:
    """Keep .thrum/ out of git without touching tracked files (info/exclude)."""
    exclude = common / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text() if exclude.exists() else ""
    if any(line.strip() in (".thrum", ".thrum/", "/.thrum/", "/.thrum") for line in text.splitlines()):
        return
    with open(exclude, "a") as f:
        if text and not text.endswith("\n"):
            f.write("\n")
        f.write("# thrum state (identities, daemon socket, database)\n.thrum/\n")


# ---------------------------------------------------------------------------- probing


def is_running(paths: ThrumPaths) -> bool:
    """True while some process holds the daemon's flock."""
    try:
        fd = os.open(paths.lock_file, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops our lock if we took it
    return False


def read_pid(paths: ThrumPaths) -> int | None:
    """The running (or last) daemon's pid from its pid file."""
    return paths.recorded_pid()


def call(paths: ThrumPaths, method: str, params: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
    """One RPC over the socket on a fresh connection (status and readiness checks, tests)."""
    with Client(paths, timeout=timeout) as client:
        return client.call(method, params or {})


def _answers(paths: ThrumPaths) -> bool:
    try:
        call(paths, "health", timeout=5.0)
        return True
    except (errors.ThrumError, OSError, ValueError):
        return False


# ---------------------------------------------------------------------------- connecting


def autostart_disabled(environ: dict[str, Any] | None = None) -> bool:
    """The ``THRUM_NO_AUTOSTART`` flag is on."""
    return envflags.flag(envflags.NO_AUTOSTART, environ)


def connect(
    paths: ThrumPaths,
    *,
    autostart: bool = True,
    quiet: bool = False,
    timeout: float | None = DEFAULT_TIMEOUT,
    trace: Trace | None = None,
) -> Client:
    """A connected `Client`, starting the daemon first when needed.

    Prints ``thrum: starting daemon…`` on stderr when it starts one (unless ``quiet``).

    Raises:
        Unavailable: not running and autostart is off (``autostart=False`` or
            ``THRUM_NO_AUTOSTART=1``), thrum is not initialised here, or the
            daemon did not come up.
    """
    client = Client(paths, timeout=timeout, trace=trace)
    try:
        return client.connect()
    except errors.Unavailable:
        if not autostart:
            raise
        if autostart_disabled():
            raise errors.Unavailable(
                "thrum daemon is not running and THRUM_NO_AUTOSTART=1 is set; start it with `thrum daemon start`"
            ) from None
        if not paths.initialized:
            raise errors.Unavailable(f"no thrum set-up in {paths.repo}; run `thrum init` first") from None

    announced = False

    def announce(_message: str) -> None:
        nonlocal announced
        if not quiet and not announced:
            announced = True
            print("thrum: starting daemon…", file=sys.stderr, flush=True)

    ensure_running(paths, autostart=True, announce=announce)
    return client.connect()


def ensure_running(paths: ThrumPaths, *, autostart: bool = True, announce: Callable[[str], None] | None = None) -> None:
    """Make sure a daemon answers; start one unless autostart is off.

    Raises:
        Unavailable: not running and not allowed to start, or start failed.
    """
    if _answers(paths):
        return
    if not autostart or autostart_disabled():
        raise errors.Unavailable(
            "thrum daemon is not running (autostart is off: THRUM_NO_AUTOSTART); start it with `thrum daemon start`"
        )
    if announce is not None:
        announce("thrum: daemon not running; starting it")
    start(paths)


# ---------------------------------------------------------------------------- start, stop


def start(
    paths: ThrumPaths, *, timeout: float = START_TIMEOUT, on_progress: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Start the daemon in the background and wait until it listens.

    ``on_progress``: called with each progress report of a start-up rebuild (phase,
    events, bytes, total_bytes, elapsed; `thrum.store.rebuild.Progress`). ``timeout``
    is the longest silence waited for, not the whole start-up (rule 2).
    """
    import subprocess

    if not paths.initialized:
        raise errors.Unavailable(f"thrum is not initialized in {paths.repo}: run `thrum init`")
    if is_running(paths) and _answers(paths):
        return {"started": False, "already_running": True, "pid": read_pid(paths)}
    paths.var.mkdir(parents=True, exist_ok=True)
    r, w = os.pipe()
    log = open(paths.log_file, "ab")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "thrum.daemon", "--repo", str(paths.main_repo), "--ready-fd", str(w)],
            pass_fds=(w,),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=str(paths.main_repo),
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(w)
        log.close()
    try:
        lines = _Lines(r)
        while True:
            line = lines.next(timeout)
            info = json.loads(line) if line else {}
            if "progress" not in info:
                break
            if on_progress is not None and isinstance(info["progress"], dict):
                on_progress(info["progress"])
    finally:
        os.close(r)
    if not line:
        code = proc.poll()
        raise errors.Unavailable(f"daemon failed to start (exit {code}); {_log_tail(paths)}")
    if info.get("already_running"):
        proc.wait(timeout=10)
        _wait_until_listening(paths, timeout)  # the other daemon may still be opening its store
        return {"started": False, "already_running": True, "pid": read_pid(paths)}
    if "error" in info:
        raise errors.Unavailable(f"daemon failed to start: {info['error']}")
    return {"started": True, "already_running": False, "pid": info["pid"]}


def _wait_until_listening(paths: ThrumPaths, timeout: float) -> None:
    """Block until the running daemon listens: it holds `starting_lock` until then (or
    until it dies, when the kernel drops the lock). No polling: a shared flock waits."""
    import fcntl
    import threading

    try:
        fd = os.open(paths.starting_lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    got = threading.Event()

    def wait() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            got.set()
        except OSError:
            pass
        finally:
            os.close(fd)

    threading.Thread(target=wait, daemon=True, name="thrum-wait-listening").start()
    if not got.wait(timeout):
        raise errors.Unavailable(
            f"thrum daemon is starting but did not listen within {timeout:g}s; see {paths.log_file}"
        )


class _Lines:
    """The JSON lines a starting daemon writes to its pipe, one at a time."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""
        self.closed = False

    def next(self, timeout: float) -> bytes:
        """The next line (stripped); b"" once the pipe is closed without one."""
        import select

        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.Unavailable(f"thrum daemon did not become ready within {timeout:g}s")
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self.closed = True
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.strip()


def _log_tail(paths: ThrumPaths) -> str:
    try:
        lines = paths.log_file.read_text(errors="replace").strip().splitlines()
    except OSError:
        return f"see {paths.log_file}"
    for line in reversed(lines[-20:]):
        if "ERROR" in line or "Error" in line:
            return line.strip()[-300:]
    return f"see {paths.log_file}"


def stop(paths: ThrumPaths, *, timeout: float = 15.0) -> dict[str, Any]:
    """SIGTERM the daemon and wait until it released its lock (pending writes flushed)."""
    import signal

    if not is_running(paths):
        return {"stopped": False, "was_running": False, "pid": None}
    pid = read_pid(paths)
    if pid is None:
        raise errors.ThrumError(f"a daemon holds {paths.lock_file} but {paths.pid_file} is unreadable")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    if not wait_stopped(paths, timeout):
        raise errors.Timeout(f"thrum daemon (pid {pid}) did not stop within {timeout:g}s; see {paths.log_file}")
    return {"stopped": True, "was_running": True, "pid": pid}


def wait_stopped(paths: ThrumPaths, timeout: float) -> bool:
    """Block on the daemon's flock (released when it exits), up to timeout; True once it is free."""
    import threading

    try:
        fd = os.open(paths.lock_file, os.O_RDWR)
    except FileNotFoundError:
        return True
    got = threading.Event()

    def take() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            got.set()
        except OSError:
            pass

    t = threading.Thread(target=take, daemon=True)
    t.start()
    ok = got.wait(timeout)
    if ok:
        os.close(fd)
    return ok


def restart(paths: ThrumPaths) -> dict[str, Any]:
    stopped = stop(paths)
    started = start(paths)
    return {"stopped": stopped["stopped"], **started}


def status(paths: ThrumPaths) -> dict[str, Any]:
    """Daemon status; works (``running: false``) when it is stopped."""
    base = {
        "running": False,
        "pid": None,
        "uptime": None,
        "socket": str(paths.socket),
        "repo": str(paths.main_repo),
        "initialized": paths.initialized,
    }
    if not is_running(paths):
        return base
    try:
        info = call(paths, "daemon.status")
    except errors.ThrumError as exc:
        return {**base, "running": True, "pid": read_pid(paths), "error": exc.message}
    return {**base, **info, "running": True}


def run_foreground(paths: ThrumPaths) -> int:
    """`thrum daemon run`: serve in this process (for service managers)."""
    if not paths.initialized:
        raise errors.Unavailable(f"thrum is not initialized in {paths.repo}: run `thrum init`")
    from .daemon.process import main

    return main(paths, foreground=True)
