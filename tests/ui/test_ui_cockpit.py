"""Issue 27: the Web UI as an all-day cockpit, in headless Chromium against real daemons.

Findings 2-8 each as the reproduction that failed before (finding 1, presence, is in
test_ui_presence.py; the 100,000-row list in test_ui_lists.py), then the long-session
behaviours (restart, another port, a frozen tab) and the supervisor's tools (mentions,
threads, permalinks, editing, groups, keyboard, notifications, density, Markdown).

The module's repository has a real remote and its daemon a fixed WebSocket port (a
free one, found at start), as a user's daemon has (9999): a restart comes back on
the same port and the page just reconnects. One test takes that port away to see the
page follow the daemon to another one.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pygit2
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus


from test_ui_browser import scroll_through
from ui_helpers import browser_missing, make_team, screenshot

_missing = browser_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

if _missing is None:
    from selenium.webdriver.common.keys import Keys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PAGE_AS = "dana"


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    r = make_team(tmp_path_factory.mktemp("ui-cockpit"), THRUM_WS_PORT=str(_free_port()))
    yield r
    r.stop()


def _live(page) -> None:
    page.wait(lambda: page.conn() == "live", what="the live connection")


def _bg(page, css: str) -> str:
    return page.js("return getComputedStyle(document.querySelector(arguments[0])).backgroundColor", css)


# ---------------------------------------------------------------------------- finding 2: restarts


def test_a_daemon_restart_heals_the_page_and_it_catches_up(page, team):
    page.go("#/feed")
    page.js("window.__notReloaded = true")
    green = _bg(page, "#main .live-dot")
    team.run("daemon", "stop")
    page.wait(lambda: page.conn() == "reconnecting", what="the page to say so")
    assert page.text("#conn") == "reconnecting…"
    assert _bg(page, "#main .live-dot") != green  # the feed's dot is no longer green
    # meanwhile an agent writes (its CLI starts the daemon again)
    mid = team.send("alice", "Written while the page was away", "--to", "@bob")
    page.wait(lambda: page.message(mid), what="the message written meanwhile")
    _live(page)
    assert page.js("return window.__notReloaded") is True  # no reload, no new login
    assert page.ids()[0] == mid


def test_a_daemon_back_on_another_port_takes_the_page_with_it(page, team):
    port = team.rpc("daemon.status")["ws_port"]
    page.go("#/feed")
    page.js("window.__notReloaded = true")
    team.run("daemon", "stop")
    page.wait(lambda: page.conn() != "live", what="the page to notice")
    with socket.socket() as squatter:  # someone else took the port meanwhile
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        mid = team.send("bob", "The daemon is on another port now")
        assert team.rpc("daemon.status")["ws_port"] != port
        page.wait(lambda: page.js("return window.__notReloaded === undefined"), what="the page to reload itself")
        _live(page)  # still signed in: the session outlived the restart
        page.wait(lambda: page.message(mid), what="the feed, read again")
    team.run("daemon", "stop")  # back to the usual port for the next tests
    team.run("daemon", "start")
    page.wait(lambda: page.conn() == "live" and page.js("return !!document.querySelector('#main .msg')"))


def test_a_frozen_tab_like_a_closed_lid_catches_up_when_it_wakes(page, team):
    page.go("#/feed")
    page.js("window.__notReloaded = true")
    # the tab is frozen (as on a sleeping laptop): no script runs, whatever happens
    # meanwhile (the socket's end included) waits until it wakes
    page.d.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "frozen"})
    try:
        team.run("daemon", "restart")
        missed = [team.send("alice", f"While the lid was closed {i}") for i in range(3)]
    finally:
        page.d.execute_cdp_cmd("Page.setWebLifecycleState", {"state": "active"})
    page.wait(lambda: all(page.message(m) for m in missed), what="what came while it slept")
    _live(page)
    assert page.ids()[:3] == missed[::-1]
    assert page.js("return window.__notReloaded") is True
    _to_front(page)


def _to_front(page) -> None:
    """Freezing hides the tab; another tab opened and closed brings it to the front again."""
    main = page.d.current_window_handle
    page.d.switch_to.new_window("tab")
    page.d.close()
    page.d.switch_to.window(main)
    page.wait(lambda: page.js("return document.visibilityState") == "visible", what="the tab in front")


def test_the_connection_state_is_visible_on_a_phone(page, team):
    page.d.set_window_size(390, 844)
    try:
        page.go("#/feed")
        assert page.find("#conn").is_displayed() and page.find("#conn .conn-dot").is_displayed()
        team.run("daemon", "stop")
        page.wait(lambda: page.conn() == "reconnecting")
        assert page.find("#conn .conn-text").is_displayed() and page.text("#conn") == "reconnecting…"
        screenshot(page.d, "phone-reconnecting")
        team.run("daemon", "start")
        _live(page)
    finally:
        page.d.set_window_size(1280, 860)


# ---------------------------------------------------------------------------- finding 3: the cookie


def test_the_cookie_replayed_from_another_local_server_is_refused(page, team):
    ui = team.ui()
    captured: dict = {}

    class Other(BaseHTTPRequestHandler):
        def do_GET(self):
            captured["cookie"] = self.headers.get("Cookie")
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><title>another local service</title>")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # the user visits another service on 127.0.0.1: cookies ignore ports, so it gets the UI's
        page.d.get(f"http://127.0.0.1:{server.server_address[1]}/")
        page.wait(lambda: "cookie" in captured)
    finally:
        server.shutdown()
        server.server_close()
    assert f"thrum_ui_{ui['port']}_" in (captured["cookie"] or "")

    async def replay():  # ... and replays it from a script, with the UI's own Origin
        try:
            async with connect(
                f"ws://127.0.0.1:{ui['ws_port']}/ws",
                origin=f"http://127.0.0.1:{ui['port']}",
                additional_headers={"Cookie": captured["cookie"]},
                subprotocols=["thrum"],
            ) as ws:
                await ws.send(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "message.send",
                            "params": {"caller": "alice", "content": "replayed"},
                        }
                    )
                )
                return await ws.recv()
        except InvalidStatus as exc:
            return exc.response.status_code

    assert asyncio.run(replay()) == 401
    assert not [
        m for m in team.rpc("message.list", {"page_size": 100})["messages"] if m["body"]["content"] == "replayed"
    ]
    page.d.back()
    _live(page)  # the tab's own session is untouched


# ---------------------------------------------------------------------------- findings 4-8


def test_a_burst_bigger_than_a_page_reaches_an_open_inbox_whole_and_in_order(page, team):
    team.agent("ivan", "auditor")
    page.go("#/inbox/ivan")
    for i in range(130):
        team.rpc("message.send", {"caller": "alice", "content": f"burst {i}", "to": ["@ivan"]})
    page.wait(lambda: page.text("#main .msg .body") == "burst 129", what="the newest of the burst")
    want, n = [], 1
    while True:  # what `thrum inbox` shows ivan, every page
        r = team.rpc("message.list", {"caller": "ivan", "exclude_own": True, "page": n, "page_size": 100})
        want += [m["message_id"] for m in r["messages"]]
        if n >= r["total_pages"]:
            break
        n += 1
    shown = scroll_through(page)
    assert shown == want
    burst = [
        m
        for m in team.rpc("message.list", {"author_id": "alice", "page_size": 100})["messages"]
        if m["body"]["content"].startswith("burst ")
    ]
    assert shown[:100] == [m["message_id"] for m in burst]  # the newest 100 of the 130, newest first


def test_subject_and_structured_data_are_shown(page, team):
    page.go("#/feed")
    mid = team.send(
        "bob",
        "See the numbers below.",
        "--subject",
        "Release 1.8 readiness",
        "--structured",
        '{"tests": {"passed": 412, "failed": 0}, "ready": true}',
    )
    page.wait(lambda: page.message(mid))
    assert page.text(f'#main .msg[data-id="{mid}"] .subject') == "Release 1.8 readiness"
    page.js(f"document.querySelector('#main .msg[data-id=\"{mid}\"] details.structured summary').click()")
    shown = page.text(f'#main .msg[data-id="{mid}"] details.structured pre')
    assert json.loads(shown) == {"tests": {"passed": 412, "failed": 0}, "ready": True}
    assert '"passed": 412' in shown  # pretty-printed


def test_a_failing_sync_shows_in_every_view(page, team):
    repo = pygit2.Repository(str(team.path))
    good = repo.remotes["origin"].url
    page.go("#/feed")
    assert not page.find("#banner").is_displayed()
    repo.remotes.set_url("origin", str(team.path.parent / "gone.git"))
    try:
        team.run("sync", check=False)
        page.js_async("return await window.__thrum.tick()")
        page.wait(lambda: page.find("#banner").is_displayed(), what="the banner in the feed")
        assert "Sync is failing" in page.text("#banner")
        assert page.text("#sync-badge") == "!"
        page.go("#/inbox/bob")
        assert page.find("#banner").is_displayed()
        screenshot(page.d, "sync-failing")
    finally:
        repo.remotes.set_url("origin", good)
    team.run("sync")
    page.js_async("return await window.__thrum.tick()")
    page.wait(lambda: not page.find("#banner").is_displayed(), what="the banner to go")


def test_compose_with_no_recipient_is_refused(page, team):
    before = team.rpc("message.list", {"page_size": 1})["total"]
    page.go("#/feed")
    page.find("#compose-button").click()
    page.find('#compose textarea[name="content"]').send_keys("To whom it may concern")
    page.find('#compose button[type="submit"]').click()
    page.wait(lambda: "Add a recipient" in page.text("#compose .error"), what="the complaint")
    assert page.find("#compose").get_attribute("open") is not None  # still open, nothing lost
    assert team.rpc("message.list", {"page_size": 1})["total"] == before
    page.find('#compose input[name="to"]').send_keys("@bob", Keys.ENTER)
    page.find('#compose button[type="submit"]').click()
    page.wait(lambda: page.find("#compose").get_attribute("open") is None)
    page.wait(lambda: "Sent to @bob" in (page.text("#toasts") or ""), what="who it went to")


# ---------------------------------------------------------------------------- the supervisor's tools


def test_mentions_of_me_and_of_human_and_the_thread_list(page, team):
    to_me = team.send("alice", "Dana, can you approve the schema change?", "--to", "@dana", "--subject", "Schema")
    to_humans = team.send("bob", "A human decision is needed on the rollout", "--to", "@human")
    team.send("alice", "Not about dana at all", "--to", "@bob")
    page.go("#/mentions")
    page.wait(lambda: page.message(to_me) and page.message(to_humans), what="both mentions")
    assert all(team.rpc("message.get", {"message_id": m})["message"]["refs"] for m in (to_me, to_humans))
    assert "Not about dana" not in page.text("#main")
    page.wait(lambda: page.text("#mentions-badge") not in ("", "0"), what="the count of unread mentions")
    page.go("#/threads")
    row = page.wait(
        lambda: page.all(
            f'#main .thread-row[data-thread="{team.rpc("message.get", {"message_id": to_me})["message"]["thread_id"]}"]'
        )
    )
    assert "Schema" in row[0].text
    row[0].click()
    page.wait(lambda: page.message(to_me, "#thread"), what="the thread")
    page.find("#thread button.close").click()


def test_agents_have_their_colour_and_initials_and_days_are_separated(page, team):
    page.go("#/feed")
    avatars = page.js("""return [...document.querySelectorAll('#main .msg')].map(m => [
        m.querySelector('.msg-head .author').textContent, m.querySelector('.avatar').textContent,
        getComputedStyle(m.querySelector('.avatar')).backgroundColor])""")
    by_author: dict = {}
    for author, initials, colour in avatars:
        by_author.setdefault(author, set()).add((initials, colour))
    assert all(len(v) == 1 for v in by_author.values())  # one look per agent
    assert next(iter(by_author["@alice"]))[0] == "AL"
    assert next(iter(by_author["@alice"])) != next(iter(by_author["@bob"]))
    assert page.text("#main .divider") == "Today"  # the first date separator


def test_an_inbox_marks_where_the_unread_end(page, team):
    team.agent("jude", "auditor")
    older = [team.send("alice", f"old {i}", "--to", "@jude") for i in range(2)]
    team.run("inbox", agent="jude")  # read in the terminal
    newer = [team.send("bob", f"new {i}", "--to", "@jude") for i in range(2)]
    page.go("#/inbox/jude")
    page.wait(lambda: page.message(older[0]))
    divider = page.js(f"""const row = document.querySelector('#main .msg[data-id="{older[-1]}"]').closest('.vl-row');
        const d = row.querySelector('.divider'); return d ? d.innerText : null""")
    assert divider is not None and "read below" in divider
    assert page.ids()[:2] == newer[::-1]


def test_permalinks_open_the_message_in_its_thread(page, team):
    root = team.send("alice", "Permalink root")
    reply = team.run("reply", root, "Permalink reply", "--json", agent="bob")
    reply_id = json.loads(reply.stdout)["message_id"]
    page.go("#/feed")
    page.wait(lambda: page.message(reply_id))
    link = page.find(f'#main .msg[data-id="{reply_id}"] a.mid')
    assert link.get_attribute("href").endswith(f"#/m/{reply_id}") and link.text == reply_id[:16]
    link.click()
    page.wait(lambda: page.all(f'#thread .msg.focus[data-id="{reply_id}"]'), what="the thread, focused")
    assert len(page.all("#thread .msg")) == 2
    page.find("#thread button.close").click()
    page.d.get(page.d.current_url.split("#")[0] + f"#/m/{root}")  # followed from elsewhere
    page.wait(lambda: page.all(f'#thread .msg.focus[data-id="{root}"]'), what="the permalink")
    page.find("#thread button.close").click()


def test_the_human_edits_deletes_and_archives(page, team):
    page.go("#/feed")
    page.find("#compose-button").click()
    page.find('#compose input[name="to"]').send_keys("@alice", Keys.ENTER)
    page.find('#compose textarea[name="content"]').send_keys("Frist draft")
    page.find('#compose button[type="submit"]').click()
    mine = page.wait(
        lambda: next(
            (m for m in team.json("inbox", agent="alice")["messages"] if m["body"]["content"] == "Frist draft"), None
        )
    )["message_id"]
    page.wait(lambda: page.message(mine))
    page.js(f"document.querySelector('#main .msg[data-id=\"{mine}\"] button.edit').click()")
    box = page.find('#edit textarea[name="content"]')
    box.clear()
    box.send_keys("First draft (fixed)")
    page.find('#edit button[type="submit"]').click()
    page.wait(lambda: "First draft (fixed)" in (page.message_text(mine) or ""), what="the edit")
    assert team.rpc("message.get", {"message_id": mine})["message"]["body"]["content"] == "First draft (fixed)"
    page.js(f"document.querySelector('#main .msg[data-id=\"{mine}\"] button.delete').click()")
    page.find('#ask input[name="answer"]').send_keys("wrong audience")
    page.find('#ask button[type="submit"]').click()
    page.wait(lambda: "(deleted: wrong audience)" in (page.message_text(mine) or ""), what="the delete")
    assert not page.all(f'#main .msg[data-id="{mine}"] button.edit')  # nothing to edit any more

    theirs = team.send("bob", "Please archive me", "--to", "@dana")
    page.go("#/mentions")
    page.wait(lambda: page.message(theirs))
    page.js(f"document.querySelector('#main .msg[data-id=\"{theirs}\"] button.archive').click()")
    page.wait(lambda: not page.message(theirs), what="it to leave dana's mentions")
    inbox = team.rpc("message.list", {"caller": "dana", "exclude_own": True, "page_size": 100})["messages"]
    assert theirs not in [m["message_id"] for m in inbox]


def test_groups_are_managed_from_the_page(page, team):
    page.go("#/agents")
    page.find('#main input[name="group"]').send_keys("release")
    page.find('#main input[name="description"]').send_keys("release crew")
    page.find("#main form.new-group button").click()
    row = '#main tr[data-group="release"]'
    page.wait(lambda: page.all(row), what="the new group")
    for k, member in enumerate(("@alice", "role:reviewer", "@bob")):
        page.type(f'{row} input[name="member"]', member, Keys.ENTER)
        page.wait(lambda k=k: len(page.all(f"{row} .chip")) == k + 1, what=f"{member} in the group")
    page.click(f'{row} .chip[data-member="agent:bob"] .chip-x')
    page.wait(lambda: not page.all(f'{row} .chip[data-member="agent:bob"]'))
    info = team.rpc("group.info", {"name": "release"})["group"]
    assert {(m["type"], m["value"]) for m in info["members"]} == {("agent", "alice"), ("role", "reviewer")}
    assert info["description"] == "release crew" and info["created_by"] == "dana"
    screenshot(page.d, "groups")
    page.click(f"{row} button.danger-link")
    page.click("#ask button[type=submit]")
    page.wait(lambda: not page.all(row), what="the group to go")
    assert "release" not in [g["name"] for g in team.rpc("group.list")["groups"]]


def test_keyboard_paths(page, team):
    ids = [team.send("alice", f"Key {i}", "--to", "@bob") for i in range(3)]
    page.go("#/feed")
    page.wait(lambda: page.ids()[:3] == ids[::-1])
    body = page.find("body")
    page.js("document.activeElement.blur()")
    body.send_keys("j")
    page.wait(lambda: page.all(f'#main .msg.selected[data-id="{ids[2]}"]'), what="j selects the first")
    body.send_keys("j")
    page.wait(lambda: page.all(f'#main .msg.selected[data-id="{ids[1]}"]'), what="j moves down")
    body.send_keys("k")
    page.wait(lambda: page.all(f'#main .msg.selected[data-id="{ids[2]}"]'), what="k moves up")
    body.send_keys("o")
    page.wait(lambda: page.all(f'#thread .msg.focus[data-id="{ids[2]}"]'), what="o opens the thread")
    page.js("document.activeElement.blur()")
    body.send_keys(Keys.ESCAPE)
    page.wait(lambda: not page.find("#thread").is_displayed(), what="Esc closes it")
    body.send_keys("r")
    page.wait(
        lambda: page.js("return document.activeElement && document.activeElement.name === 'reply'"),
        what="r: the reply box, focused",
    )
    page.js("document.activeElement.blur()")
    body.send_keys(Keys.ESCAPE)
    body.send_keys("/")
    page.wait(lambda: page.js("return document.activeElement && document.activeElement.name === 'q'"), what="/")
    page.js("document.activeElement.blur()")
    body.send_keys("?")
    page.wait(lambda: page.find("#help").get_attribute("open") is not None, what="? shows the keys")
    assert "next / previous message" in page.text("#help")
    page.find("#help button.close").click()
    body.send_keys("g", "m")
    page.wait(lambda: page.js("return location.hash") == "#/mentions", what="g m")
    body.send_keys("n")
    page.wait(lambda: page.find("#compose").get_attribute("open") is not None, what="n composes")
    page.find('#compose button[type="button"]').click()


def test_notifications_title_count_and_desktop_alerts_off_by_default(page, team):
    team.rpc("message.markRead", {"caller": "dana", "all": True})
    page.go("#/feed")
    page.wait(lambda: page.d.title == "thrum", what="no unread in the title")
    page.js("""window.__notes = [];
        window.Notification = function (title, opts) { window.__notes.push([title, opts.body]); };
        window.Notification.permission = 'default';
        window.Notification.requestPermission = async () => {
          window.Notification.permission = 'granted';
          return 'granted';
        };""")
    team.send("bob", "Critical before turning them on", "--priority", "critical")
    page.wait(lambda: page.d.title == "(1) thrum", what="the title to count dana's unread")
    assert page.js("return window.__notes") == []  # off by default
    button = page.find("#notify-button")
    assert button.get_attribute("aria-pressed") == "false"
    button.click()  # one click
    page.wait(lambda: button.get_attribute("aria-pressed") == "true")
    team.send("alice", "Only for the reviewer", "--to", "@reviewer")
    team.send("alice", "Need a human here", "--to", "@human")
    team.send("bob", "Prod is down", "--priority", "critical")
    page.wait(lambda: len(page.js("return window.__notes")) == 2, what="two desktop notifications")
    assert page.js("return window.__notes") == [["@alice", "Need a human here"], ["@bob (critical)", "Prod is down"]]
    button.click()
    page.wait(lambda: button.get_attribute("aria-pressed") == "false")


def test_compact_density_is_one_key_and_remembered(page, team):
    page.go("#/feed")
    height = page.js("return document.querySelector('#main .msg').getBoundingClientRect().height")
    page.js("document.activeElement.blur()")
    page.find("body").send_keys("d")
    page.wait(lambda: page.js("return document.body.classList.contains('dense')"))
    page.wait(lambda: page.js("return document.querySelector('#main .msg').getBoundingClientRect().height") < height)
    screenshot(page.d, "compact")
    page.d.refresh()
    _live(page)
    assert page.js("return document.body.classList.contains('dense')")
    page.find("#density-button").click()
    assert not page.js("return document.body.classList.contains('dense')")


def test_markdown_messages_render_and_stay_safe(page, team):
    page.go("#/feed")
    mid = team.send(
        "alice",
        "**Done**: see `make test`\n\n- [docs](https://example.com/docs)\n"
        "- [trap](javascript:alert(1)) <img src=x onerror=alert(1)>",
    )
    page.wait(lambda: page.message(mid))
    body = f'#main .msg[data-id="{mid}"] .body'
    assert page.text(f"{body} strong") == "Done" and page.text(f"{body} code") == "make test"
    links = page.js(f"return [...document.querySelectorAll('{body} a')].map(a => a.getAttribute('href'))")
    assert links == ["https://example.com/docs"]
    assert not page.all(f"{body} img") and "<img src=x onerror=alert(1)>" in page.text(body)


def test_a_fork_in_a_writers_chain_shows_on_the_status_board(page, team, tmp_path):
    """Per-writer chains (issue 25): a second event at one of alice's positions, pushed by
    someone holding her key, shows above every view as a chain fork (last in this file:
    the fork stays)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "hostile"))
    from hostile_helpers import Attacker, fork_latest

    team.run("send", "before the fork", "--to", "@bob", agent="alice")
    team.run("sync")
    page.go("#/feed")
    page.js_async("return await window.__thrum.tick()")
    assert not page.find("#banner").is_displayed()
    mallory = Attacker(team.remote, tmp_path / "mallory")
    key = team.path / ".thrum" / "identities" / "alice.key"
    target, _ = fork_latest(mallory, "alice", key, "receipts/alice/000009.jsonl")
    mallory.push("alice, twice")
    team.run("sync")
    page.js_async("return await window.__thrum.tick()")
    chains = '#banner .status-line[data-source="chains"]'
    # The board redraws as status arrives: read the line in one step each time, never hold it.
    page.wait(lambda: "Chain fork" in (page.text(chains) or ""), what="the chain fork on the board")
    assert page.js("return document.querySelector(arguments[0]).classList.contains('error')", chains)
    assert f"alice #{target['chain']['seq']}" in page.text(chains)
    page.go("#/inbox/bob")
    assert page.find("#banner").is_displayed()  # whatever view is open
