"""Hook tests run ``thrum hook`` as a host does (a process, `hook_helpers.run_hook`); they set
up and inspect through the end-to-end helpers' repositories, whose other commands run in the
test's process (`InProcessRepo`)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

from e2e_helpers import InProcessRepo, repo_factory_of  # noqa: E402

repo_factory = repo_factory_of(InProcessRepo)
