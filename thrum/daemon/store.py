"""Renamed to `thrum.daemon.writer` (it is the single writer, not the `thrum.store` package).

Shim for branches written before the rename; the lead removes it once they are merged.
"""

from .writer import Writer as Store, open_projection, tail_position  # noqa: F401
