"""The Web UI in a real browser (headless Chromium driven by Selenium) against a real
daemon whose repository has a real remote; the CLI plays the agents.

One daemon and one browser for the module (tests use their own agents where counts
matter). Screenshots of the main views go to tmp/artefacts/ui/ (THRUM_ARTEFACTS).
The issue-27 behaviours (restart, catch-up, presence, long lists, the supervisor's
tools) are in test_ui_cockpit.py, test_ui_presence.py and test_ui_lists.py.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pygit2
import pytest

from ui_helpers import TWO_AGENTS, browser_missing, make_team, screenshot

_missing = browser_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

if _missing is None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A clone of a bare remote, thrum initialised, three agents."""
    r = make_team(tmp_path_factory.mktemp("ui-browser"), agents=(*TWO_AGENTS, ("carol", "tester", "")))
    yield r
    r.stop()


# ---------------------------------------------------------------------------- the feed


def test_feed_shows_a_message_sent_from_the_cli_as_it_is_pushed(page, team):
    page.go("#/feed")
    page.js("window.__notReloaded = true")
    listed = page.js("return window.__thrum.calls.filter(c => c.method === 'message.list').length")
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
    # pushed, not polled: on the page without the page listing the feed again (or reloading)
    el = page.wait(lambda: page.message(mid), what="the new message in the feed")
    assert page.js("return window.__notReloaded") is True
    assert page.js("return window.__thrum.calls.filter(c => c.method === 'message.list').length") == listed
    text = el.text
    for part in ("@alice", "@reviewer", "module:auth", "high", "Auth module done, all tests green"):
        assert part in text, part
    assert page.all("#main .msg")[0].get_attribute("data-id") == mid  # newest first
    screenshot(page.d, "feed")


def test_an_edit_and_a_delete_update_the_message_in_place(page, team):
    page.go("#/feed")
    mid = team.send("alice", "Deploying at 5pm", "--to", "@everyone")
    noted = team.send("carol", "Noted")
    page.wait(lambda: page.message(mid))
    page.wait(lambda: page.message(noted))
    position = page.ids().index(mid)
    page.js("window.__notReloaded = true")
    team.run("message", "edit", mid, "Deploying at 6pm (moved)", agent="alice")
    page.wait(lambda: "Deploying at 6pm (moved)" in (page.message_text(mid) or ""), what="the edit")
    assert "edited" in page.message_text(mid)
    team.run("message", "delete", mid, "--force", agent="alice")
    page.wait(lambda: "deleted" in (page.message(mid).get_attribute("class") or ""), what="the delete")
    assert "(deleted" in page.text(f'#main .msg[data-id="{mid}"] .body')
    # at the same place, without reading the list again
    assert page.ids().index(mid) == position
    assert page.js("return window.__notReloaded") is True


def test_the_feed_reads_older_messages_as_you_scroll_and_holds_only_what_is_in_view(page, team):
    bulk = [{"type": "bulk", "value": "1"}]
    for i in range(230):
        team.rpc("message.send", {"caller": "carol", "content": f"bulk {i}", "scopes": bulk})
    page.d.refresh()
    page.wait(lambda: page.conn() == "live")
    page.go("#/feed")
    total = team.rpc("message.list", {"include_deleted": True, "page_size": 1})["total"]
    assert page.text("#main .view-head .count") == f"{total:,} messages"
    seen = scroll_through(page)
    assert len(seen) == len(set(seen)) == total
    assert seen == [m["message_id"] for m in all_messages(team)]  # newest first, none missing, none twice


def all_messages(team) -> list[dict]:
    out, page_no = [], 1
    while True:
        r = team.rpc(
            "message.list", {"include_deleted": True, "include_archived": True, "page_size": 100, "page": page_no}
        )
        out += r["messages"]
        if page_no >= r["total_pages"]:
            return out
        page_no += 1


def scroll_through(page, max_rows: int = 80) -> list[str]:
    """Every message id of the current list, in order, read by scrolling from top to bottom;
    the DOM never holds more than ``max_rows`` messages on the way."""
    frames = "await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    page.js_async(f"document.getElementById('main').scrollTop = 0; {frames}")
    seen: list[str] = []
    while True:
        page.wait(lambda: not page.all("#main .vl-row.placeholder"), what="the rows in view to be read")
        ids = page.ids()
        assert len(ids) <= max_rows, len(ids)
        if seen:
            assert seen[-1] in ids, "rows skipped while scrolling"
            ids = ids[ids.index(seen[-1]) + 1 :]
        seen += ids
        at_end = page.js(
            "const m = document.getElementById('main'); return m.scrollTop + m.clientHeight >= m.scrollHeight - 2"
        )
        if at_end and page.text("#main .list-status") == "— the beginning —":
            return seen
        page.js_async(f"const m = document.getElementById('main'); m.scrollTop += m.clientHeight * 0.8; {frames}")


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
    assert page.text("#main .unread-count") == "3"  # (read in one step: the view redraws as data arrives)
    unread = page.js("return [...document.querySelectorAll('#main .msg.unread')].map((m) => m.dataset.id)")
    assert set(unread) == set(mids)
    screenshot(page.d, "inbox")

    team.run("inbox", agent="erin")  # erin reads them in her terminal
    page.wait(lambda: page.badge("erin") == "", what="the sidebar count to drop")
    page.wait(lambda: not page.all("#main .msg.unread"), what="the read markers")
    assert page.text("#main .unread-count") == "0"

    page.js(f"document.querySelector('#main .msg[data-id=\"{mids[0]}\"] button.mark').click()")  # "Mark unread"
    page.wait(lambda: page.badge("erin") == "1", what="one unread again")
    assert team.rpc("message.counts", {"caller": "erin"})["unread"] == 1
    page.wait(lambda: "Mark read" in (page.message_text(mids[0]) or ""), what="the button to say so")
    page.js(f"document.querySelector('#main .msg[data-id=\"{mids[0]}\"] button.mark').click()")  # "Mark read"
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
    page.wait(lambda: page.message(question))
    page.js(f"document.querySelector('#main .msg[data-id=\"{question}\"] .body').click()")
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
    assert cells[0].split("\n")[-1] == "@alice" and cells[1:4] == ["agent", "implementer", "auth"]
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
