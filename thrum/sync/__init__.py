"""Git replication of the event log: the ``a-sync`` branch, its worktree, the merge.

Layers, lowest first (docs/design/architecture.md; tests/test_architecture.py):

- ``merge/``      the merge, pure: bytes in, bytes out (no pygit2, no trio, no I/O)
- ``transport/``  reaching a remote: URLs, logins, SSH settings (``ssh -G``), a path remote
  looked at before use, timeouts (libgit2's transport for every kind of remote)
- ``gitstore/``   git objects and refs behind one interface (``gitstore.api.GitStore``: libgit2's
  implementation and an in-memory one), and everything else libgit2 does for thrum
- the cycle: ``logaccess`` (what a cycle needs from the log's owner), ``trees`` and
  ``treemerge`` (a remote tree merged in bounded chunks), ``replicate`` (commit, fetch,
  merge, push), ``cycle`` (one sync, retried on races), ``state`` (the record of the
  last one), ``gate`` (the daemon may abandon a cycle only while it waits on the
  network), ``worktree`` (the ``a-sync`` branch and its linked worktree), ``offline``
  (a cycle without the daemon), ``diagnose`` (``thrum doctor``'s git checks),
  ``maintenance`` (git's repacks keep the object stores compact), ``remotetip``,
  ``rollback``, ``remoteview``, ``verifyrange`` and ``teamfile``

The error types live here so every layer shares them without importing another.
Each carries the ``SYNC_ERROR`` JSON-RPC code (it is a :class:`thrum.errors.SyncFailed`)
and a one-line message a person can act on.
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
