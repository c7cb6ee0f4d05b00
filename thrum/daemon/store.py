"""Renamed to `thrum.daemon.writer` (it is the single writer, not the `thrum.store` package).

Shim for branches written before the rename; the lead removes it once they are merged.
"""

from ..store.projection import open_projection  # noqa: F401
from .writer import Writer as Store, tail_position  # noqa: F401
