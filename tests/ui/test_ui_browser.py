"""The Web UI in a real browser (headless Chromium driven by Selenium) against a real
daemon whose repository has a real remote; the CLI plays the agents.

One daemon and one browser for the module (tests use their own agents where counts
matter). Screenshots of the main views go to tmp/artefacts/ui/ (THRUM_ARTEFACTS).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pygit2
import pytest

from fixtures.repos.builders import make_replicas
from ui_helpers import WAIT, Repo, browser_missing, screenshot, start_browser, stop_browser

_missing = browser_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

if _missing is None:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A clone of a bare remote, thrum initialised, three agents."""
    pair = make_replicas(tmp_path_factory.mktemp("ui-browser"), 1)
    r = Repo(pair.a).init()
    r.remote = pair.remote
    r.agent("alice", "implementer", "auth")
    r.agent("bob", "reviewer", "auth")
    r.agent("carol", "tester")
    yield r
    r.stop()


class Page:
    def __init__(self, driver, team: Repo):
        self.d = driver
        self.team = team

    def wait(self, predicate, timeout: float = WAIT, what: str = ""):
        try:
            return WebDriverWait(self.d, timeout, poll_frequency=0.02).until(lambda d: predicate())
        except TimeoutException:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or predicate}") from None

    def js(self, script: str, *args):
        return self.d.execute_script(script, *args)

    def find(self, css: str):
        return self.d.find_element(By.CSS_SELECTOR, css)

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

    def badge(self, agent: str) -> str:
        return self.find(f'#inbox-list .unread-badge[data-agent="{agent}"]').text

    def login(self) -> None:
        self.d.get(self.team.ui()["url"])
        self.wait(lambda: self.find("#conn").get_attribute("data-state") == "live", what="the live connection")

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


@pytest.fixture(scope="module")
def page(team):
    driver = start_browser()
    p = Page(driver, team)
    try:
        p.login()
        yield p
    finally:
        for entry in driver.get_log("browser"):
            if entry.get("level") == "SEVERE":
                print("browser console:", entry)
        stop_browser(driver)


# ---------------------------------------------------------------------------- the feed


def test_feed_shows_a_message_sent_from_the_cli_within_a_second(page, team):
    page.go("#/feed")
    page.js("window.__notReloaded = true")
    mid = team.send(
        "alice",
        "Auth module done, all tests green",
        "--to",
        "@reviewer",
        "--scope",
        "module:auth",
        "--priority",
        "high",
    )
    # pushed, not polled: it is on the page within a second of the CLI returning
    el = page.wait(lambda: page.message(mid), timeout=1.0, what="the new message in the feed")
    assert page.js("return window.__notReloaded") is True
    text = el.text
    for part in ("@alice", "@reviewer", "module:auth", "high", "Auth module done, all tests green"):
        assert part in text, part
    assert page.all("#main .msg")[0].get_attribute("data-id") == mid  # newest first
    screenshot(page.d, "feed")


def test_an_edit_and_a_delete_update_the_message_in_place(page, team):
    page.go("#/feed")
    mid = team.send("alice", "Deploying at 5pm", "--to", "@everyone")
    noted = team.send("carol", "Noted")
    el = page.wait(lambda: page.message(mid))
    page.wait(lambda: page.message(noted))
    position = [m.get_attribute("data-id") for m in page.all("#main .msg")].index(mid)
    team.run("message", "edit", mid, "Deploying at 6pm (moved)", agent="alice")
    page.wait(lambda: "Deploying at 6pm (moved)" in el.text and "edited" in el.text, what="the edit")
    team.run("message", "delete", mid, "--force", agent="alice")
    page.wait(lambda: "deleted" in (el.get_attribute("class") or ""), what="the delete")
    assert "(deleted" in el.find_element(By.CSS_SELECTOR, ".body").text
    # the same element, at the same place: updated in place, not re-listed
    assert [m.get_attribute("data-id") for m in page.all("#main .msg")].index(mid) == position


def test_the_feed_pages_in_older_messages_as_you_scroll(page, team):
    bulk = [{"type": "bulk", "value": "1"}]
    for i in range(130):
        team.rpc("message.send", {"caller": "carol", "content": f"bulk {i}", "scopes": bulk})
    page.d.refresh()
    page.wait(lambda: page.find("#conn").get_attribute("data-state") == "live")
    page.go("#/feed")
    total = team.rpc("message.list", {"include_deleted": True, "page_size": 1})["total"]
    first = len(page.all("#main .msg"))
    assert 0 < first <= 100 < total, (first, total)  # one or two pages, not everything

    def more_than(n: int):
        return lambda: len(page.all("#main .msg")) > n or page.find("#main .list-status").text == "— the beginning —"

    while page.find("#main .list-status").text != "— the beginning —":
        before = len(page.all("#main .msg"))
        page.js("document.querySelector('#main .sentinel').scrollIntoView()")
        page.wait(more_than(before), what="the next page")
    ids = [m.get_attribute("data-id") for m in page.all("#main .msg")]
    assert len(ids) == len(set(ids)) == total
    assert page.find("#main .view-head .count").text == f"{total:,} messages"


# ---------------------------------------------------------------------------- inboxes


def test_an_inbox_shows_unread_counts_that_drop_when_read(page, team):
    team.agent("erin", "auditor")
    team.rpc("message.markRead", {"caller": "erin", "all": True})
    page.go("#/inbox/erin")
    page.wait(lambda: page.all('#inbox-list .unread-badge[data-agent="erin"]'), what="erin in the sidebar")
    page.wait(lambda: page.badge("erin") == "", what="no unread for erin")
    mids = [team.send("alice", f"Audit item {i}", "--to", "@erin") for i in range(3)]
    page.wait(lambda: page.badge("erin") == "3", what="3 unread in the sidebar")
    page.wait(lambda: len(page.all("#main .msg.unread")) == 3, what="3 unread in the inbox")
    assert page.find("#main .unread-count").text == "3"
    assert {m.get_attribute("data-id") for m in page.all("#main .msg.unread")} == set(mids)
    screenshot(page.d, "inbox")

    team.run("inbox", agent="erin")  # erin reads them in her terminal
    page.wait(lambda: page.badge("erin") == "", what="the sidebar count to drop")
    page.wait(lambda: not page.all("#main .msg.unread"), what="the read markers")
    assert page.find("#main .unread-count").text == "0"

    page.message(mids[0]).find_element(By.CSS_SELECTOR, "button.mark").click()  # "Mark unread"
    page.wait(lambda: page.badge("erin") == "1", what="one unread again")
    assert team.rpc("message.counts", {"caller": "erin"})["unread"] == 1
    page.message(mids[0]).find_element(By.CSS_SELECTOR, "button.mark").click()  # "Mark read"
    page.wait(lambda: page.badge("erin") == "", what="none unread")


def test_inbox_filters_are_those_of_thrum_inbox(page, team):
    team.agent("frank", "auditor")
    to_frank = team.send("alice", "Only for frank", "--to", "@frank", "--scope", "module:billing")
    team.send("alice", "Not for frank")
    page.go("#/inbox/frank?mentions=1&unread=1&scope=module:billing")
    page.wait(lambda: page.message(to_frank), what="the filtered inbox")
    assert page.find('#main input[name="mentions"]').is_selected()
    cli = team.json("inbox", "--mentions", "--unread", "--scope", "module:billing", agent="frank")
    shown = [m.get_attribute("data-id") for m in page.all("#main .msg")]
    assert shown == [m["message_id"] for m in cli["messages"]]


# ---------------------------------------------------------------------------- threads, compose


def test_a_thread_and_a_reply_from_the_page(page, team):
    page.go("#/feed")
    page.be("dana")
    assert team.rpc("agent.get", {"name": "dana"})["agent"]["kind"] == "user"
    question = team.send("alice", "Can someone review PR 12?", "--to", "@reviewer")
    team.run("reply", question, "On it, looking now", agent="bob")
    page.wait(lambda: page.message(question)).click()
    page.wait(lambda: len(page.all("#thread .msg")) == 2, what="the thread")
    authors = [m.find_element(By.CSS_SELECTOR, ".author").text for m in page.all("#thread .msg")]
    assert authors == ["@alice", "@bob"]  # oldest first
    box = page.find('#thread textarea[name="reply"]')
    box.send_keys("Thanks both, merging after CI")
    page.find('#thread form.reply button[type="submit"]').click()
    page.wait(lambda: len(page.all("#thread .msg")) == 3, what="the reply in the thread")
    last = page.all("#thread .msg")[-1]
    assert "@dana" in last.text and "human" in last.text and "Thanks both" in last.text
    screenshot(page.d, "thread")

    inbox = team.json("inbox", agent="alice")  # alice sees it in her terminal
    reply = next(m for m in inbox["messages"] if m["body"]["content"] == "Thanks both, merging after CI")
    assert reply["agent_id"] == "dana" and reply["reply_to"] == question
    # opening the thread as dana read it for dana
    assert team.rpc("message.get", {"message_id": question, "caller": "dana"})["message"]["is_read"]
    page.find("#thread button.close").click()


def test_compose_to_a_role(page, team):
    page.go("#/feed")
    page.be("dana")
    page.find("#compose-button").click()
    to = page.find('#compose input[name="to"]')
    to.send_keys("@reviewr", Keys.ENTER)  # a typo first
    page.find('#compose textarea[name="content"]').send_keys("Please review the auth refactor")
    page.find('#compose button[type="submit"]').click()
    page.wait(lambda: "did you mean @reviewer" in page.find("#compose .error").text, what="the close match")
    page.find('#compose .chip[data-address="reviewr"] .chip-x').click()
    to.send_keys("@reviewer", Keys.ENTER)
    page.find('#compose input[name="scope"]').send_keys("module:auth")
    page.find('#compose input[name="ref"]').send_keys("issue:42")
    page.find('#compose select[name="priority"] option[value="high"]').click()
    screenshot(page.d, "compose")
    page.find('#compose button[type="submit"]').click()
    page.wait(lambda: not page.find("#compose").get_attribute("open"), what="the dialog to close")

    bob = team.json("inbox", "--mentions", "--unread", agent="bob")
    sent = next(m for m in bob["messages"] if m["body"]["content"] == "Please review the auth refactor")
    assert sent["agent_id"] == "dana" and sent["priority"] == "high"
    assert {"type": "mention", "value": "reviewer"} in sent["refs"]
    assert {"type": "issue", "value": "42"} in sent["refs"]
    assert sent["scopes"] == [{"type": "module", "value": "auth"}]
    page.wait(lambda: page.message(sent["message_id"]), what="the sent message in the feed")


# ---------------------------------------------------------------------------- agents, sync


def test_agents_and_groups_with_live_changes(page, team):
    team.run("group", "create", "leads", agent="alice")
    team.run("group", "add", "leads", "@alice", agent="alice")
    team.run("group", "add", "leads", "--role", "reviewer", agent="alice")
    page.go("#/agents")
    cells = page.js("return [...document.querySelectorAll('#main tr[data-agent=\"alice\"] td')].map(c => c.innerText)")
    assert cells[0].startswith("@alice") and cells[1:4] == ["agent", "implementer", "auth"]
    assert "active" in cells[4] and cells[5] != "never"
    group = page.text('#main tr[data-group="leads"]')
    assert "@alice" in group and "role reviewer" in group
    assert page.text('#main tr[data-group="everyone"]')
    team.agent("gina", "implementer", "ui")  # appears without a reload
    page.wait(lambda: page.text('#main tr[data-agent="gina"]'), what="the new agent")
    team.run("group", "add", "leads", "@gina", agent="alice")
    page.wait(lambda: "@gina" in (page.text('#main tr[data-group="leads"]') or ""), what="the new member")
    screenshot(page.d, "agents")


def test_sync_panel_shows_state_and_syncs_now(page, team):
    page.go("#/sync")
    cell = lambda k: page.text(f'#main tr[data-key="{k}"] td')  # noqa: E731
    assert cell("mode") == "remote"
    assert cell("remote").startswith("origin") and str(team.remote) in cell("remote")
    page.find("#main .view-head button.primary").click()
    page.wait(lambda: page.find("#main .sync-result").text.startswith("synced in"), timeout=60, what="the sync")
    assert cell("last success") != "never" and cell("pending events") == "0"
    remote = pygit2.Repository(str(team.remote))
    assert remote.references.get("refs/heads/a-sync") is not None  # it really reached the remote
    screenshot(page.d, "sync")


# ---------------------------------------------------------------------------- another origin

EVIL = """<!doctype html><meta charset=utf-8><title>pending</title><script>
const out = {ws: "pending", fetch: "pending"};
const done = () => { if (out.ws !== "pending" && out.fetch !== "pending") document.title = JSON.stringify(out); };
const ws = new WebSocket("ws://127.0.0.1:WS_PORT/ws");
ws.onopen = () => { out.ws = "open"; ws.send(JSON.stringify({jsonrpc: "2.0", id: 1, method: "message.send",
  params: {caller: "alice", content: "sent by another origin"}})); setTimeout(done, 500); };
ws.onclose = () => { if (out.ws === "pending") out.ws = "refused"; done(); };
fetch("http://127.0.0.1:UI_PORT/api/session", {credentials: "include"})
  .then(r => r.text()).then(t => { out.fetch = "read: " + t; done(); })
  .catch(e => { out.fetch = "blocked"; done(); });
</script>"""


def test_a_page_from_another_origin_can_neither_read_nor_send(page, team):
    ui = team.ui()
    body = EVIL.replace("WS_PORT", str(ui["ws_port"])).replace("UI_PORT", str(ui["port"])).encode()

    class Evil(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # same host, another port: the same site, so the browser does send the UI's cookie
        page.d.get(f"http://127.0.0.1:{server.server_address[1]}/")
        page.wait(lambda: page.d.title != "pending", what="the other page's attempts")
        result = json.loads(page.d.title)
    finally:
        server.shutdown()
        server.server_close()
    assert result == {"ws": "refused", "fetch": "blocked"}
    log = (team.path / ".thrum" / "var" / "daemon.log").read_text()
    assert f"Origin 'http://127.0.0.1:{server.server_address[1]}' may not use this daemon" in log
    everything = team.rpc("message.list", {"page_size": 100, "include_deleted": True})["messages"]
    assert not [m for m in everything if m["body"]["content"] == "sent by another origin"]
    page.login()  # and the UI itself still works
    page.go("#/feed")


# ---------------------------------------------------------------------------- narrow windows


def test_a_narrow_window_keeps_everything_reachable(page, team):
    page.d.set_window_size(390, 844)
    try:
        page.go("#/feed")
        assert page.js("return document.documentElement.scrollWidth <= window.innerWidth")
        assert not page.find("#sidebar").is_displayed()
        screenshot(page.d, "narrow-feed")
        page.find("#menu-toggle").click()
        page.wait(lambda: page.find("#sidebar").is_displayed(), what="the drawer")
        page.find('#sidebar a[data-inbox="bob"]').click()
        page.wait(lambda: not page.find("#sidebar").is_displayed(), what="the drawer to close")
        page.go("#/inbox/bob")
        first = page.wait(lambda: page.all("#main .msg"), what="bob's inbox")[0]
        first.click()
        page.wait(lambda: page.all("#thread .msg"), what="the thread")
        width = page.js("return document.getElementById('thread').getBoundingClientRect().width")
        assert width >= 380
        assert page.js("return document.documentElement.scrollWidth <= window.innerWidth")
        screenshot(page.d, "narrow-thread")
        page.find("#thread button.close").click()
    finally:
        page.d.set_window_size(1280, 860)


# ---------------------------------------------------------------------------- last: a daemon restart


def test_after_a_daemon_restart_the_page_says_to_run_thrum_ui_again(page, team):
    ui = team.ui()
    page.go("#/feed")
    team.run("daemon", "stop")
    page.wait(lambda: page.find("#conn").get_attribute("data-state") != "live", what="the page to notice")
    team.ui("--port", str(ui["port"]))  # a new daemon, same UI port, new secret
    page.wait(lambda: page.find("#conn").get_attribute("data-state") == "expired", what="signed out")
    assert "thrum ui" in page.text("#main")
    screenshot(page.d, "signed-out")
    page.login()  # a new link signs the browser in again
    page.go("#/feed")
    assert page.all("#main .msg")
