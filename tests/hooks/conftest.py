"""Hook tests drive the installed ``thrum`` like a host does; they reuse the end-to-end helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "e2e"))

from e2e_helpers import Repo  # noqa: E402
from fixtures.repos.builders import make_repo  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="module")
def repo_factory(tmp_path_factory):
    made: list[Repo] = []

    def make(name: str = "repo", *, init: bool = True) -> Repo:
        path = tmp_path_factory.mktemp("hooks") / name
        make_repo(path)
        r = Repo(path)
        made.append(r)
        return r.init() if init else r

    yield make
    for r in reversed(made):
        r.stop()
