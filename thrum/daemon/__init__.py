"""The thrum daemon: the only writer of a repository's event log."""
