"""The Web UI's search box (issue 26 item 4) and delivery states (issue 24 item 5), in
headless Chromium against a real daemon.

Search: `/` focuses the box, results come as you type (message.search, the newest
query winning), each hit with its snippet and the matching words marked, hostile text
staying text, a bad query a one-line error; a hit opens the message in its thread.

Delivery: what the human sent, each recipient's state (sent → delivered → surfaced →
acked) on the message in the Sent view and the thread pane, moving as the receipts
arrive, and the acknowledgements still owed counted in the sidebar.
"""

from __future__ import annotations

import pytest

from ui_helpers import browser_missing, make_team, screenshot

_missing = browser_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")

if _missing is None:
    from selenium.webdriver.common.keys import Keys


PAGE_AS = "dana"


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    r = make_team(tmp_path_factory.mktemp("ui-search"), remote=False)
    yield r
    r.stop()


def _hits(page) -> list[str]:
    return page.ids("#main .results")


def _search_box_focused(page) -> bool:
    return bool(page.js("return document.activeElement && document.activeElement.name === 'q'"))


# ---------------------------------------------------------------------------- search


def test_slash_focuses_the_search_box_and_results_come_as_you_type(page, team):
    config = team.send(
        "alice", "parse_config breaks on an empty file in store/fold.py", "--to", "@bob", "--subject", "Config loader"
    )
    team.send("bob", "The deploy is green; nothing about configuration here", "--to", "@alice")
    other = team.send("bob", "Parsing is fine elsewhere", "--to", "@alice")
    page.go("#/feed")
    page.js("document.activeElement.blur()")
    page.find("body").send_keys("/")
    page.wait(lambda: _search_box_focused(page), what="/ to focus the search box")
    page.js("window.__notReloaded = true")

    box = page.find('#search input[name="q"]')
    box.send_keys("parse_con")
    page.wait(lambda: page.js("return location.hash") == "#/search?q=parse_con", what="the search view")
    page.wait(lambda: _hits(page) == [config], what="results for the prefix as typed so far")
    box.send_keys("fig")  # the query goes on as you type; no Enter needed
    page.wait(lambda: page.js("return location.hash") == "#/search?q=parse_config")
    page.wait(lambda: _hits(page) == [config] and "1 result" in page.text("#main .search .count"))
    hit = f'#main .results .msg[data-id="{config}"]'
    marked = page.js(f"return [...document.querySelectorAll('{hit} .snippet mark')].map(m => m.textContent)")
    assert marked and all("parse" in m.lower() or "config" in m.lower() for m in marked)
    # the snippet is the message's own text, and the subject is shown
    assert "breaks on an empty file" in page.text(f"{hit} .snippet")
    assert page.text(f"{hit} .subject") == "Config loader"

    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("pars*")  # another query replaces the results
    page.wait(lambda: set(_hits(page)) == {config, other}, what="the new query's results")
    assert page.js("return window.__notReloaded") is True  # one page all along

    # Enter opens the best hit in its thread; a click opens any
    box.send_keys(Keys.ENTER)
    page.wait(lambda: page.all("#thread .msg.focus"), what="Enter to open the first hit")
    page.find("#thread button.close").click()
    page.click(f'#main .results .msg[data-id="{other}"] .body')
    page.wait(lambda: page.all(f'#thread .msg.focus[data-id="{other}"]'), what="the hit, open in its thread")
    screenshot(page.d, "search")
    page.find("#thread button.close").click()


def test_search_results_are_text_and_a_bad_query_says_what_is_wrong(page, team):
    hostile = team.send("bob", 'needle <img src=x onerror="window.__pwned=1"> <b>bold</b> `code`', "--to", "@alice")
    page.go("#/feed")
    page.js("document.activeElement.blur()")
    page.find("body").send_keys("/")
    page.wait(lambda: _search_box_focused(page))
    box = page.find('#search input[name="q"]')
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("needle")
    page.wait(lambda: _hits(page) == [hostile], what="the hostile message found")
    hit = f'#main .results .msg[data-id="{hostile}"]'
    assert "<img" in page.text(f"{hit} .snippet")  # shown as the characters it is
    assert page.all(f"{hit} img") == [] and page.all(f"{hit} b") == []
    assert page.js("return window.__pwned") is None

    box.send_keys(Keys.CONTROL, "a")
    box.send_keys('"unbalanced')
    page.wait(lambda: page.all("#main .search-error"), what="the error")
    error = page.text("#main .search-error")
    assert "unbalanced quote" in error and "sqlite" not in error.lower()
    assert "\n" not in error.strip()
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("from:bob needle")  # the same box takes the field filters
    page.wait(lambda: _hits(page) == [hostile], what="a filtered query")


def test_a_search_link_opens_the_search_and_edits_and_deletes_are_reflected(page, team):
    mid = team.send("alice", "the flamingo protocol needs review", "--to", "@bob")
    page.go("#/search?q=flamingo")
    page.wait(lambda: _hits(page) == [mid])
    assert page.js("return document.querySelector('#search input').value") == "flamingo"
    team.run("message", "edit", mid, "the pelican protocol needs review", agent="alice")
    page.go("#/search?q=pelican")
    page.wait(lambda: _hits(page) == [mid], what="the edited message by its new words")
    page.go("#/search?q=flamingo")
    page.wait(lambda: "Nothing found" in (page.text("#main .results") or ""), what="not by its old words")


# ---------------------------------------------------------------------------- delivery states


def _state(page, where: str, mid: str, agent: str) -> str | None:
    return page.js(
        "const e = document.querySelector(arguments[0]);return e ? e.dataset.state : null",
        f'{where} .msg[data-id="{mid}"] .dstate[data-agent="{agent}"]',
    )


def test_each_recipients_delivery_state_is_on_the_message_and_moves_live(page, team):
    page.go("#/sent")
    page.find("#compose-button").click()  # the human asks for an ack from the page
    page.find('#compose input[name="to"]').send_keys("@alice", Keys.ENTER)
    page.find('#compose select[name="ack"] option[value="600"]').click()
    page.find('#compose textarea[name="content"]').send_keys("Freeze main until I say so")
    page.find('#compose button[type="submit"]').click()
    page.wait(lambda: page.find("#compose").get_attribute("open") is None)
    page.wait(lambda: page.ids()[:1] != [] and page.js("return document.querySelector('#main .msg') !== null"))
    mid = page.ids()[0]
    assert team.rpc("message.get", {"message_id": mid})["message"]["ack"]["within"] == 600
    page.wait(lambda: page.message(mid), what="the message in dana's Sent view")
    assert _state(page, "#main", mid, "alice") in ("sent", "delivered")
    assert "ack asked" in page.text(f'#main .msg[data-id="{mid}"] .badge.ack')
    page.wait(lambda: page.text("#unacked-badge") == "1", what="the ack owed, counted in the sidebar")

    # alice's hook asks what to show (delivered is recorded) and shows it (surfaced)
    pending = team.rpc("message.pending", {"caller": "alice"})
    assert mid in [m["message_id"] for m in pending["messages"]]
    page.wait(lambda: _state(page, "#main", mid, "alice") == "delivered", what="delivered, live")
    team.rpc("message.surface", {"caller": "alice", "message_ids": [mid], "via": "test hook"})
    page.wait(lambda: _state(page, "#main", mid, "alice") == "surfaced", what="surfaced, live")
    title = page.js(
        "return document.querySelector(arguments[0]).title",
        f'#main .msg[data-id="{mid}"] .dstate[data-agent="alice"]',
    )
    assert "context" in title and "delivered" in title  # what the state means, and when each came

    # the thread pane shows the same, and follows it too
    page.click(f'#main .msg[data-id="{mid}"] .body')
    page.wait(lambda: _state(page, "#thread", mid, "alice") == "surfaced", what="the states in the thread")
    page.go("#/sent?unacked=1")
    page.wait(lambda: page.ids() == [mid], what="listed as unacknowledged")
    team.run("ack", mid, agent="alice")
    page.wait(lambda: _state(page, "#thread", mid, "alice") == "acked", what="acked, in the thread")
    page.wait(lambda: page.ids() == [], what="no longer listed as unacknowledged")
    page.wait(lambda: page.text("#unacked-badge") == "", what="nothing owed any more")
    page.go("#/sent")
    page.wait(lambda: _state(page, "#main", mid, "alice") == "acked", what="acked, in the list")
    screenshot(page.d, "delivery")
    page.find("#thread button.close").click()


def test_a_message_to_many_sums_its_recipients_up(page, team):
    for name in ("carol", "erin", "frank"):
        team.agent(name, "implementer")
    mid = team.rpc("message.send", {"caller": "dana", "content": "Standup in five minutes", "to": ["everyone"]})[
        "message_id"
    ]
    team.rpc("message.pending", {"caller": "alice"})
    team.rpc("message.surface", {"caller": "alice", "message_ids": [mid]})
    page.go("#/sent")
    page.wait(lambda: page.message(mid))
    summary = f'#main .msg[data-id="{mid}"] .delivery summary'
    page.wait(lambda: "surfaced" in (page.text(summary) or ""), what="the summary")
    text = page.text(summary)
    assert text.startswith("5 recipients") and "1 surfaced" in text  # alice, bob, carol, erin, frank
    agents = page.js(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.agent)",
        f'#main .msg[data-id="{mid}"] .dstate',
    )
    assert sorted(agents) == ["alice", "bob", "carol", "erin", "frank"]


def test_receipts_for_many_messages_reach_the_rows_out_of_view_too(page, team):
    """One hook call surfaces 150 of dana's messages: the rows in view change at once,
    the others when scrolled to (read again with their page), none stays behind."""
    sent = [
        team.rpc("message.send", {"caller": "dana", "content": f"Batch {i}", "to": ["bob"]})["message_id"]
        for i in range(150)
    ]
    page.go("#/sent")
    page.wait(lambda: page.ids()[:1] == [sent[-1]], what="the newest on top")
    team.rpc("message.pending", {"caller": "bob", "limit": 100})  # delivered, for all 150
    team.rpc("message.surface", {"caller": "bob", "message_ids": sent, "via": "test hook"})
    page.wait(lambda: _state(page, "#main", sent[-1], "bob") == "surfaced", what="the rows in view, at once")
    states = {}
    frames = "await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
    for _ in range(200):
        page.wait(lambda: not page.all("#main .vl-row.placeholder"), what="the rows in view to be read")
        for mid in page.ids():
            if mid in sent:
                states[mid] = _state(page, "#main", mid, "bob")
        if len(states) == len(sent):
            break
        page.js_async(f"const m = document.getElementById('main'); m.scrollTop += m.clientHeight * 0.8; {frames}")
    assert len(states) == len(sent)
    assert set(states.values()) == {"surfaced"}
