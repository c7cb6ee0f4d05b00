"""Git objects and refs behind one interface (`api.GitStore`), and everything libgit2.

- ``api``         the interface, object ids and git's object formats (pure)
- ``libgit2``     the implementation over pygit2 (one repository handle)
- ``memory``      an in-memory implementation for tests; both pass one conformance suite
                  (tests/sync/test_gitstore_conformance.py)
- ``gitlib``      libgit2 specifics: cffi, tuning, the worktree index, released pack handles
- ``objbatch``    a sync step's new objects written as one pack (``packfile``: its writer)
- ``indexstats``  the worktree index's stat data, handed to the store in batches

pygit2 is imported here (``libgit2``, ``gitlib``) and in the transport, nowhere else.
Nothing is re-exported here: import from the module that defines a name.
"""
