"""The merge of the log: pure, bytes in and bytes out (no pygit2, no trio, no I/O).

- ``shard``   the per-file rule: two versions of one log file become one (and its fast path)
- ``layout``  which entries of a fetched tree are log files, and what changed between two trees

Nothing is re-exported here: import from the module that defines a name.
"""
