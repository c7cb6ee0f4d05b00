"""Where thrum keeps its files for a repository.

Rules:

1. The repository is found by walking up from ``--repo`` (default: the current
   directory) to the first directory holding ``.git`` (a directory, or a file for
   linked worktrees and submodules).
2. ``.thrum/`` lives at that top level. In a linked worktree of the user's repo,
   ``.thrum/redirect`` holds the absolute path of the main checkout's ``.thrum/``
   so the whole repository shares one daemon; every path below follows it.
3. Every resolution checks that the state is the user's own (`thrum.ownership`):
   nothing under ``.thrum/`` tracked by git, nothing of another user's.
4. The socket is ``.thrum/var/thrum.sock`` unless that path is too long for a
   Unix socket address (~107 bytes); then it is a deterministic path under a
   private runtime directory, derived from the ``.thrum`` path, so clients and
   the daemon agree without talking.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ThrumError

MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS; keep a margin


class NotARepository(ThrumError):
    code = -32005


def find_repo_root(start: os.PathLike[str] | str | None = None) -> Path:
    """Top of the git work tree containing ``start``.

    Raises:
        NotARepository: no ``.git`` above ``start``.
    """
    here = Path(start or os.getcwd()).expanduser()
    try:
        here = here.resolve()
    except OSError:
        pass
    if not here.exists():
        raise NotARepository(f"{here} does not exist")
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    raise NotARepository(f"not a git repository: {here} (run thrum inside a git checkout, or pass --repo)")


class ThrumPaths:
    """All the paths of one repository's thrum state (immutable, compared by value).

    A plain class rather than a dataclass: `dataclasses` pulls in `inspect` and
    `ast`, ~10 ms on the start-up of every command and of the Gas City provider.
    """

    __slots__ = ("repo", "thrum_dir")

    repo: Path  # the checkout the user is in
    thrum_dir: Path  # the .thrum directory in use (after following a redirect)

    def __init__(self, repo: Path, thrum_dir: Path):
        object.__setattr__(self, "repo", repo)
        object.__setattr__(self, "thrum_dir", thrum_dir)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ThrumPaths is immutable (cannot set {name})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ThrumPaths):
            return NotImplemented
        return (self.repo, self.thrum_dir) == (other.repo, other.thrum_dir)

    def __hash__(self) -> int:
        return hash((self.repo, self.thrum_dir))

    def __repr__(self) -> str:
        return f"ThrumPaths(repo={self.repo!r}, thrum_dir={self.thrum_dir!r})"

    @property
    def main_repo(self) -> Path:
        return self.thrum_dir.parent

    @property
    def identities(self) -> Path:
        return self.thrum_dir / "identities"

    @property
    def var(self) -> Path:
        return self.thrum_dir / "var"

    @property
    def config(self) -> Path:
        return self.thrum_dir / "config.json"

    @property
    def pid_file(self) -> Path:
        return self.var / "thrum.pid"

    def recorded_pid(self) -> int | None:
        """The pid the daemon wrote to `pid_file`; None when there is none or it is unreadable."""
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    @property
    def lock_file(self) -> Path:
        return self.var / "thrum.lock"

    @property
    def starting_lock(self) -> Path:
        """Held by a daemon from taking `lock_file` until its socket listens."""
        return self.var / "thrum.starting"

    @property
    def log_file(self) -> Path:
        return self.var / "daemon.log"

    @property
    def database(self) -> Path:
        return self.var / "messages.db"

    @property
    def ws_port_file(self) -> Path:
        return self.var / "ws.port"

    @property
    def ws_token_file(self) -> Path:
        return self.var / "ws.token"

    @property
    def sync_lock_file(self) -> Path:
        return self.var / "sync.lock"

    @property
    def socket(self) -> Path:
        return socket_path_for(self.var)

    @property
    def initialized(self) -> bool:
        return self.thrum_dir.is_dir()


def socket_path_for(var_dir: Path) -> Path:
    preferred = var_dir / "thrum.sock"
    if len(os.fsencode(str(preferred))) <= MAX_SOCKET_PATH:
        return preferred
    import hashlib  # only for deep repositories: keep it off every command's start-up

    digest = hashlib.sha256(os.fsencode(str(var_dir.resolve()))).hexdigest()[:20]
    return runtime_dir() / f"{digest}.sock"


def runtime_dir() -> Path:
    """A private (0700) directory for sockets whose natural path is too long."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir() and len(base) < 40:
        d = Path(base) / "thrum"
    else:
        d = Path("/tmp") / f"thrum-{os.getuid()}"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.stat()
    if st.st_uid != os.getuid():
        raise ThrumError(f"{d} belongs to another user; set XDG_RUNTIME_DIR to a private directory")
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)
    return d


MAIN_WORKTREE = "main"


def worktree_name(repo_root: os.PathLike[str] | str) -> str:
    """The name of the git worktree at ``repo_root``, as agents publish it (spec/events.md
    ``agent.register.worktree``): ``main`` for the main checkout, the linked worktree's
    own name (``.git/worktrees/<name>``) otherwise. Never a local path: registrations
    travel to every clone of the repository.

    Reads the ``.git`` file of a linked worktree (`linked_git_dir`); no git library,
    as this is on the CLI's start-up path.
    """
    gitdir = linked_git_dir(repo_root)
    if gitdir is not None and gitdir.parent.name == "worktrees" and gitdir.name:
        return gitdir.name
    return MAIN_WORKTREE  # the main checkout, or a submodule's checkout: its own main worktree


def linked_git_dir(repo_root: os.PathLike[str] | str) -> Path | None:
    """Where the ``.git`` *file* of a linked worktree or submodule points (one line,
    ``gitdir: <path>``, relative to the checkout when not absolute); None for a
    ``.git`` directory or anything unreadable."""
    dotgit = Path(repo_root) / ".git"
    if not dotgit.is_file():
        return None
    try:
        line = dotgit.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line[len("gitdir:") :].strip())
    return gitdir if gitdir.is_absolute() else Path(repo_root) / gitdir


def resolve(repo: os.PathLike[str] | str | None = None, *, check: bool = True) -> ThrumPaths:
    """Paths for the repository containing ``repo`` (following ``.thrum/redirect``).

    ``check``: refuse state that is not the user's own, tracked by git or another
    user's (`thrum.ownership`); only ``thrum doctor`` looks without it, to report it.

    Raises:
        NotARepository: no git repository there.
        UntrustedState: ``check`` and the state is not the user's own (one line: why).
    """
    paths = _resolve(repo)
    if check:
        from .ownership import require_own_state

        require_own_state(paths)
    return paths


def _resolve(repo: os.PathLike[str] | str | None) -> ThrumPaths:
    root = find_repo_root(repo)
    thrum_dir = root / ".thrum"
    redirect = thrum_dir / "redirect"
    if redirect.is_file():
        target = Path(redirect.read_text().strip())
        if not target.is_absolute() or not target.is_dir():
            raise ThrumError(
                f"{redirect} points to {target}, which is not a .thrum directory; "
                "run `thrum init` again in this worktree"
            )
        thrum_dir = target
    return ThrumPaths(repo=root, thrum_dir=thrum_dir)
