"""Fixtures for the Web UI tests: repositories with their daemon (started by the
installed CLI), and a headless Chromium for the browser tests (skipped, with the
command that installs it, where Chromium is missing).

A browser test module defines its ``team`` (a module-scoped `ui_helpers.make_team`)
and gets ``page``: one logged-in browser for the module, acting as the module's
``PAGE_AS`` when it names one."""

from __future__ import annotations

import pytest

from fixtures.repos.builders import make_repo
from ui_helpers import Repo, start_browser, stop_browser


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Repo:
    """One initialised repository (local only) for a whole test module."""
    path = tmp_path_factory.mktemp("ui") / "repo"
    make_repo(path)
    r = Repo(path, THRUM_LOCAL="1").init()
    yield r
    r.stop()


@pytest.fixture
def fresh_repo(tmp_path) -> Repo:
    path = tmp_path / "repo"
    make_repo(path)
    r = Repo(path, THRUM_LOCAL="1").init()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def page(request, team: Repo):
    from browser_page import Page

    driver = start_browser()
    p = Page(driver, team)
    try:
        p.login()
        if getattr(request.module, "PAGE_AS", None):
            p.be(request.module.PAGE_AS)
        yield p
    finally:
        for entry in driver.get_log("browser"):
            if entry.get("level") == "SEVERE":
                print("browser console:", entry)
        stop_browser(driver)
