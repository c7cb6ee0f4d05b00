"""Git replication of the event log: the ``a-sync`` branch, its worktree, the merge.

Modules:

- ``worktree``    the orphan branch ``a-sync`` and its linked worktree (never checked out by libgit2)
- ``merge``       the pure per-file merge rule (no pygit2, no trio)
- ``trees``       the log's layout in git trees: what changed, what is ignored, new trees
- ``treemerge``   merging a remote tree into the worktree in bounded chunks; key summaries
- ``replicate``   commit / fetch / merge / push against a git remote (pygit2)
- ``cycle``       one sync: fetch, merge, commit, push, retried on races
- ``gate``        lets the daemon abandon a cycle's thread while (only while) it waits on the network
- ``gitlib``      libgit2 specifics (cffi, tuning, raw trees)
- ``credentials`` where logins come from (per operation), host keys, one-line errors
- ``forwarded``   whether an ssh-agent a ``thrum sync`` passed along still lives
- ``transport``   one network operation: URL, ~/.ssh/config, timeout, logins settled
- ``gitcredential`` git's credential helpers (``git credential fill|approve|reject``)
- ``sshconfig``   ``~/.ssh/config`` host aliases and ``known_hosts`` (pure)
- ``urls``        remote URL kinds, relative paths, credentials redacted (pure)
- ``diagnose``    the git checks of ``thrum doctor``
- ``localremote`` object copying for remotes on a local filesystem
- ``packs``, ``hygiene``  compact object stores: thrum's pack writer, consolidation
- ``safefs``      worktree file access that never follows a link
- ``offline``     the daemon-stopped sync and the record of the last sync

The error types live here so both git modules share them without importing each
other. Each carries the ``SYNC_ERROR`` JSON-RPC code (it is a
:class:`thrum.errors.SyncFailed`) and a one-line message a person can act on.
"""

from __future__ import annotations

from thrum.errors import SyncFailed


class SyncError(SyncFailed):
    """A sync step failed; ``str(err)`` is one line saying what and where."""


class NotAGitRepository(SyncError):
    """The path is not inside a git repository."""


class AuthError(SyncError):
    """The remote refused our credentials (or none were configured)."""


class RemoteUnreachable(SyncError):
    """The remote could not be reached: no such path, host down, refused, DNS."""


class PushRejected(SyncError):
    """The remote refused the push for a reason other than "fetch first"."""


__all__ = ["SyncError", "NotAGitRepository", "AuthError", "RemoteUnreachable", "PushRejected"]
