"""Hook tests drive the installed ``thrum`` like a host does; they reuse the end-to-end helpers and fixture."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

from e2e_helpers import repo_factory  # noqa: E402, F401  (the fixture)
