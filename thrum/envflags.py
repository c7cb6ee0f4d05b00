"""On/off switches read from the environment (``THRUM_NO_AUTOSTART``, ``THRUM_LOCAL``, ``THRUM_DEBUG``).

One rule for every flag, so no two modules disagree: unset, empty, ``0``,
``false``, ``no`` and ``off`` (any case, surrounding spaces ignored) mean off;
any other value means on. Stdlib ``os`` only: it is on the CLI's start-up path.
"""

from __future__ import annotations

import os
from typing import Mapping

NO_AUTOSTART = "THRUM_NO_AUTOSTART"  # commands never start the daemon on their own
LOCAL = "THRUM_LOCAL"  # local-only mode: sync commits but never fetches or pushes
DEBUG = "THRUM_DEBUG"  # the CLI prints tracebacks and RPC traces

OFF_VALUES = frozenset({"", "0", "false", "no", "off"})


def is_on(value: str | None) -> bool:
    """The flag rule applied to one raw value (None: unset)."""
    return value is not None and value.strip().lower() not in OFF_VALUES


def flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment flag ``name`` is on (``environ`` defaults to ``os.environ``)."""
    return is_on((os.environ if environ is None else environ).get(name))
