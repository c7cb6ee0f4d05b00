"""What libgit2 sees of both repositories during a fetch: the refs the fetch is about, no others.

libgit2 decides what a fetch transfers and what it offers from every ref there is:

- its local transport (a path or ``file://`` remote) ignores the refspecs: it packs
  everything reachable from every ref of the remote (its code branches; an annotated
  tag with the whole tree of its commit) less what every ref of ours reaches, and walks
  the whole tree of each ref of ours the remote also holds to find that out;
- the smart protocol (SSH, HTTPS) asks for the refspecs' sources only, but offers as
  common history ("have") the newest commits of all our refs: the user's branches first
  when they are newer than the log's;
- with tags on "auto" (a remote's default) every tag of the remote whose object we hold
  is created among the user's refs.

The remote of a team is the project's code remote and the replica's repository the
user's code checkout, so a sync brought and walked code at every receive (measured in
docs/design/decisions.md, "A fetch sees the log's refs only"). So a fetch runs between
two views, kept per remote under ``<common dir>/thrum-sync/fetch/<remote>/``:

1. The local view (`local_view`): our repository (its objects, its config and remotes)
   whose refs are those of a private directory (``local``) holding only the refspecs'
   destinations, copied in before each fetch; our ref named as a source only while its
   destination is missing (a first fetch). Only those are hidden from a local
   transport's pack and offered as "have"; the fetched destinations are copied back to
   the real refs by the caller. The destination (the remote-tracking ref) is the
   remote's tip as our last fetch or push left it: what our ``a-sync`` holds beyond it
   the remote lacks, so hiding it or offering it adds nothing, and copying it in cost
   every sync after a merge or a commit one more ref written (a rename over a file:
   ~0.2 ms of CPU and 1-8 ms of waiting on ext4, which writes the replaced file out).
2. The remote view (`remote_view`, path remotes only): a private bare repository
   (``remote``) that borrows the remote's objects (``objects/info/alternates``, after
   `transport.pathremote` looked at the remote) and whose only refs are the refspecs'
   sources as the remote holds them: libgit2's local transport opens it instead of the
   remote, and packs what those refs reach beyond what the local view's refs reach.
3. No tags are fetched (`gitlib.fetch_refs`).

4. Several processes may fetch through the same views (a daemon and an offline `thrum
   sync`): a fetch holds the views' lock (`FetchViews.held`, an advisory lock on a file
   beside them) from copying the refs in to the end of the fetch, so none reads a tip
   another one wrote for its own fetch.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pygit2

from .gitlib import open_repo

__all__ = ["FetchViews", "LocalView", "Refspec", "parse_refspecs"]

VIEWS_DIR = Path("thrum-sync", "fetch")  # beside the worktree (`worktree`) and the repack dir (`maintenance`)


@dataclass(frozen=True)
class Refspec:
    """One ``[+]src:dst`` of a fetch (no patterns: thrum fetches named refs)."""

    src: str
    dst: str


def parse_refspecs(refspecs: list[str]) -> list[Refspec]:
    """Raises: ValueError: a refspec without both sides, or with a pattern."""
    out = []
    for spec in refspecs:
        src, sep, dst = spec.removeprefix("+").partition(":")
        if not sep or not src.startswith("refs/") or not dst.startswith("refs/") or "*" in spec:
            raise ValueError(f"a fetch names its refs (+refs/...:refs/...), not {spec!r}")
        out.append(Refspec(src, dst))
    return out


def _dir_name(remote: str) -> str:
    """A directory name for any remote name git accepts (slashes, dots, non-ASCII)."""
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", remote)[:40]
    return f"{readable}-{hashlib.sha256(remote.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


def _bare(path: Path) -> pygit2.Repository:
    if not (path / "HEAD").is_file():
        pygit2.init_repository(str(path), bare=True)  # HEAD unborn: no ref of its own
    return open_repo(path)


def _set(repo: pygit2.Repository, name: str, target: pygit2.Oid | None, *, look_up: bool = True) -> None:
    """Point ``name`` at ``target`` (None: delete it), writing nothing when it already is.

    Without ``look_up``, through a ref transaction, which writes the ref as given
    (creating it looks the object up first: in the remote view that loaded the remote's
    pack indexes, ~0.3 ms of each receive's fetch, and a handle holding them; a
    transaction's lock costs ~0.2 ms more than a plain write elsewhere). The object is
    there (its id was read from a ref of a store that holds it); were it not, the fetch
    fails on it with one line."""
    current = repo.references.get(name)
    if target is None:
        if current is not None:
            current.delete()
    elif current is not None and current.type == pygit2.enums.ReferenceType.DIRECT and current.target == target:
        return
    elif look_up:
        repo.references.create(name, target, force=True)
    else:
        with repo.transaction() as tx:
            tx.lock_ref(name)
            tx.set_target(name, target, message="thrum: fetch view")


def _direct(repo: pygit2.Repository, name: str) -> pygit2.Oid | None:
    ref = repo.references.get(name)
    if ref is None:
        return None
    try:
        target = ref.resolve().target
    except (pygit2.GitError, KeyError):
        return None
    return target if isinstance(target, pygit2.Oid) else None


@dataclass(frozen=True)
class LocalView:
    """The local view (``repo``) and the repository its refs live in, which must outlive it:
    libgit2's ref backend keeps a bare pointer to that repository."""

    repo: pygit2.Repository
    refs: pygit2.Repository


class FetchViews:
    """The two views of the fetches from ``remote`` into the repository at ``common_dir``.

    Their handles are kept between fetches (opening them cost ~0.35 ms of every sync's
    fetch, a no-op's included): one owner's thread at a time, as its store."""

    def __init__(self, common_dir: Path, remote: str):
        self.common_dir = common_dir
        self.root = common_dir / VIEWS_DIR / _dir_name(remote)
        self._local: LocalView | None = None
        self._names: set[str] = set()  # the refs the local view was last given
        self._remote_dir = self.root / "remote"
        self._alternates = self._remote_dir / "objects" / "info" / "alternates"
        self._remote: pygit2.Repository | None = None
        self._theirs: tuple[Path, pygit2.Repository] | None = None  # the path remote, opened

    @contextmanager
    def held(self) -> Iterator[None]:
        """The views to this process alone (module rule 4), for one fetch."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # lets the lock go (a descriptor kept open would outlive a dropped store)

    @contextmanager
    def local_view(self, repo: pygit2.Repository, specs: list[Refspec]) -> Iterator[pygit2.Repository]:
        """Our repository with only the refs of ``specs`` (module rule 1), as ``repo`` holds
        them now. Its objects are ``repo``'s own database, lent for the fetch only: what
        the fetch writes ``repo`` sees, and the view holds none of its packs in between
        (a repack deletes them: `gitlib.PackWatch`)."""
        if self._local is None:
            refs = _bare(self.root / "local")
            view = open_repo(self.common_dir)
            refdb = pygit2.Refdb.new(view)
            refdb.set_backend(pygit2.RefdbFsBackend(refs))
            view.set_refdb(refdb)
            self._local = LocalView(view, refs)
        view = self._local.repo
        view.set_odb(repo.odb)
        try:
            firsts = {spec.src for spec in specs if _direct(repo, spec.dst) is None}  # rule 1: a first fetch
            names = {spec.dst for spec in specs} | firsts
            if names != self._names:
                for name in set(view.references) - names:  # left by a fetch of other refs
                    _set(view, name, None)
                self._names = names
            for name in sorted(names):
                _set(view, name, _direct(repo, name))
            yield view
        finally:
            view.set_odb(pygit2.Odb())  # empty (never `free`: that would drop the view's refs too)

    def remote_view(self, git_dir: Path, specs: list[Refspec]) -> str:
        """The path of the remote view of the path remote at ``git_dir`` (module rule 2),
        its refs set to the remote's sources of ``specs``; ``git_dir`` was looked at
        (`transport.pathremote`).

        Raises:
            pygit2.GitError: the remote cannot be opened, or a ref names an object it lacks.
        """
        if self._remote is None:
            self._remote = _bare(self._remote_dir)
        if self._theirs is None or self._theirs[0] != git_dir:  # a ref is read from disk at each look-up
            self._theirs = (git_dir, open_repo(git_dir))
        alternates = self._alternates
        line = f"{git_dir / 'objects'}\n"  # the look resolved git_dir
        try:
            current = alternates.read_text()
        except OSError:
            current = None
        if current != line:
            alternates.parent.mkdir(parents=True, exist_ok=True)
            tmp = alternates.with_name(f"alternates.{os.getpid()}.tmp")
            tmp.write_text(line)
            os.replace(tmp, alternates)
            self._remote = open_repo(self._remote_dir)  # its object database read the old list
        for spec in specs:
            _set(self._remote, spec.src, _direct(self._theirs[1], spec.src), look_up=False)
        return str(self._remote_dir)
