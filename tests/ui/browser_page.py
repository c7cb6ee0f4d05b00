"""The page as the browser tests drive it: waits with deadlines (never sleeps), the
views, the messages on screen, logging in and choosing the human identity."""

from __future__ import annotations

import time

from fixtures import waiting
from ui_helpers import WAIT, browser_missing

if browser_missing() is None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By


class Page:
    def __init__(self, driver, team):
        self.d = driver
        self.team = team

    def wait(self, predicate, timeout: float = WAIT, what: str = ""):
        """``predicate()``'s first truthy value; each look is a round trip through the
        driver and the browser, so a long wait looks less often (`waiting.pauses`)."""
        deadline = time.monotonic() + timeout
        for pause in waiting.pauses(0.02):
            try:
                got = predicate()
            except StaleElementReferenceException:  # redrawn between finding and reading: look again
                got = None
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what or predicate}")
            time.sleep(pause)

    def js(self, script: str, *args):
        return self.d.execute_script(script, *args)

    def js_async(self, script: str, *args):
        """Run ``script`` (an async function body; ``return`` its result) and wait for it."""
        return self.d.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"(async (...args) => {{ {script} }})(...arguments).then(done, (e) => done({{error: String(e)}}));",
            *args,
        )

    def find(self, css: str):
        return self.d.find_element(By.CSS_SELECTOR, css)

    def type(self, css: str, *keys) -> None:
        """Type into the element ``css`` names, finding it again if the view redrew it meanwhile."""
        self._retry(lambda: self.find(css).send_keys(*keys), css)

    def click(self, css: str) -> None:
        self._retry(lambda: self.find(css).click(), css)

    def _retry(self, act, css: str) -> None:
        def attempt():
            try:
                act()
                return True
            except StaleElementReferenceException:
                return False

        self.wait(attempt, what=f"{css} to stay put long enough")

    def all(self, css: str) -> list:
        return self.d.find_elements(By.CSS_SELECTOR, css)

    def go(self, hash_: str) -> None:
        """Show a view and wait until its first page is in."""
        self.js("location.hash = arguments[0]", hash_)
        self.wait(
            lambda: self.js(
                "const m = document.getElementById('main');"
                "return m.dataset.route === arguments[0] && m.dataset.ready === '1'",
                hash_,
            ),
            what=f"view {hash_}",
        )

    def text(self, css: str) -> str | None:
        """innerText of the first match, read in one step (tables are redrawn as data arrives)."""
        return self.js("const e = document.querySelector(arguments[0]); return e ? e.innerText : null", css)

    def message(self, mid: str, where: str = "#main"):
        found = self.all(f'{where} .msg[data-id="{mid}"]')
        return found[0] if found else None

    def message_text(self, mid: str, where: str = "#main") -> str | None:
        return self.text(f'{where} .msg[data-id="{mid}"]')

    def ids(self, where: str = "#main") -> list[str]:
        return self.js(f"return [...document.querySelectorAll('{where} .msg[data-id]')].map(e => e.dataset.id)")

    def badge(self, agent: str) -> str:
        return self.text(f'#inbox-list .unread-badge[data-agent="{agent}"]') or ""

    def conn(self) -> str | None:
        return self.js("const e = document.getElementById('conn'); return e ? e.dataset.state : null")

    def login(self, url: str | None = None) -> None:
        self.d.get(url or self.team.ui()["url"])
        self.wait(lambda: self.conn() == "live", what="the live connection")

    def be(self, name: str) -> None:
        """Act as the human ``name`` (registered from the page's dialog when new)."""
        if self.find("#me-button").text == f"@{name}":
            return
        self.find("#me-button").click()
        known = self.all(f'#identity .use-identity[data-name="{name}"]')
        if known:
            known[0].click()
        else:
            self.find('#identity input[name="name"]').send_keys(name)
            self.find('#identity button[type="submit"]').click()
        self.wait(lambda: self.find("#me-button").text == f"@{name}", what=f"acting as @{name}")

    def console_errors(self) -> list[dict]:
        return [e for e in self.d.get_log("browser") if e.get("level") == "SEVERE"]
