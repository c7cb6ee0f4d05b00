"""Reaching a git remote: URLs, logins, SSH settings, timeouts, one network operation.

- ``urls``          remote URL kinds, relative paths, credentials redacted (pure)
- ``endpoint``      where a remote really is: relative paths resolved, SSH hosts asked of OpenSSH
- ``ssh``           OpenSSH's settings for a host (``ssh -G``) and ``known_hosts``
- ``credentials``   where logins come from (pure: the record the git store's interface takes)
- ``callbacks``     libgit2's side of a login: each source tried once, host keys checked
- ``failures``      any failure of a network operation as one line naming the remote
- ``gitcredential`` git's credential helpers (``git credential fill|approve|reject``)
- ``forwarded``     whether an ssh-agent a ``thrum sync`` passed along still lives
- ``session``       one fetch, push or ref listing through libgit2: logins settled, errors translated

Nothing is re-exported here: import from the module that defines a name.
"""
