"""Git objects and refs behind one interface (`api.GitStore`), and everything libgit2.

- ``api``       the interface, object ids and git's object formats (pure)
- ``libgit2``   the implementation over pygit2 (one repository handle)
- ``memory``    an in-memory implementation for tests; both pass one conformance suite
- ``gitlib``    libgit2 specifics: cffi, tuning, the worktree index, released pack handles
- ``objbatch``  a sync step's new objects written as one pack (``packfile``)

Nothing is re-exported here: import from the module that defines a name.
"""
