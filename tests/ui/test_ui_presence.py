"""Issue 27 finding 1: watching must not falsify presence.

The page read unread counts (and inboxes) on every agent's behalf, and the daemon
took each call as that agent being active: while the UI was open, ``last_seen_at``
kept moving to "now" for every agent, so `recipient_status` and `agent cleanup`
saw dead agents as alive. Now the page's connection is an observer: none of its
calls sees anyone (so no heartbeat is written for them), and the read marks it
presses for an agent are not presence (docs/design/ui.md, "Presence"; thrum.presence).

The daemon runs in this test's trio run on a mock clock (the daemon's clock hooks, as
in tests/daemon/test_daemon_clock.py) that the test moves: the page's own periodic
work (`window.__thrum.tick`, every 30 s) is driven 120 times, and after each the
daemon's clock jumps 30 s, firing every deadline due by then (presence flushes,
connection clocks): an hour of it. Between jumps daemon time stands still, so no
deadline fires while the browser works in real time (a clock that jumped whenever the
daemon was idle for 50 ms took 30-219 s to get through the hour's deadlines).
"""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from browser_page import Page
from fixtures.repos.builders import make_repo
from thrum import jsonrpc, lifecycle
from thrum.daemon import dispatch
from thrum.daemon.server import Daemon
from ui_helpers import browser_missing, start_browser, stop_browser

_missing = browser_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")


class _Agent:
    """A connection of an agent's own (not an observer): its calls mark it as seen."""


async def _rpc(daemon: Daemon, method: str, params: dict, conn=None) -> dict:
    assert daemon.services is not None
    reply = await dispatch.handle(
        daemon.services, conn or _Agent(), jsonrpc.Request(method=method, params=params, id=1)
    )
    assert "error" not in reply, reply
    return reply["result"]


async def _seen(daemon: Daemon) -> dict[str, str]:
    agents = (await _rpc(daemon, "agent.list", {}))["agents"]
    return {a["agent_id"]: a["last_seen_at"] for a in agents}


@pytest.fixture
def daemon_clock():
    """Daemon time, standing still until the test moves it (`MockClock.jump`)."""
    return trio.testing.MockClock()


async def test_an_hour_of_the_page_watching_marks_no_agent_as_seen(daemon_clock, tmp_path):
    repo = tmp_path / "repo"
    make_repo(repo)
    paths = lifecycle.init_repo(repo, start_daemon=False)
    paths.config.write_text(json.dumps({"local_only": True, "ws_port": 0, "ui_port": 0}))
    daemon = Daemon(paths)
    driver = None
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run)
        for name, role, kind in (
            ("alice", "implementer", "agent"),
            ("carol", "tester", "agent"),
            ("erin", "auditor", "agent"),
            ("dana", "human", "user"),
        ):
            await _rpc(daemon, "agent.register", {"name": name, "role": role, "kind": kind})
        for name in ("carol", "erin", "dana"):  # each was last active at some moment of its own
            await _rpc(daemon, "message.counts", {"caller": name})
        for i in range(5):
            await _rpc(daemon, "message.send", {"caller": "alice", "content": f"for carol {i}", "to": ["@carol"]})
        await _rpc(daemon, "message.send", {"caller": "carol", "content": "to the human", "to": ["@dana"]})
        before = await _seen(daemon)
        assert all(before[n] for n in ("carol", "erin", "dana"))
        url = (await _rpc(daemon, "ui.open", {"port": 0}))["url"]

        driver = await trio.to_thread.run_sync(start_browser)
        page = Page(driver, None)
        try:

            def watch() -> None:
                """What a person does with the page open: every view, every inbox, threads,
                marking for an agent, sending as the human."""
                page.login(url)
                page.be("dana")
                for view in ("#/feed", "#/inbox/carol", "#/inbox/erin", "#/inbox/dana", "#/mentions", "#/agents"):
                    page.go(view)
                page.go("#/inbox/carol")
                first = page.wait(lambda: page.all("#main .msg"), what="carol's inbox")[0]
                first.find_element("css selector", "button.mark").click()  # "Mark read", for carol
                page.go("#/feed")
                page.all("#main .msg")[0].click()  # open a thread (read as dana)
                page.wait(lambda: page.all("#thread .msg"), what="the thread")
                page.find('#thread textarea[name="reply"]').send_keys("noted")
                page.find('#thread form.reply button[type="submit"]').click()
                page.wait(lambda: len(page.all("#thread .msg")) == 2, what="the reply")
                page.go("#/sync")

            await trio.to_thread.run_sync(watch)
            # an hour: the page's ticks, news arriving (counts re-read on every agent's
            # behalf each time), and the daemon's clock moving through its deadlines
            started = trio.current_time()
            for i in range(120):
                if i % 10 == 0:
                    await _rpc(daemon, "message.send", {"caller": "alice", "content": f"news {i}", "to": ["@erin"]})
                await trio.to_thread.run_sync(page.js_async, "return await window.__thrum.tick()")
                daemon_clock.jump(30)  # the daemon's clock moves 30 s: every deadline due by then fires
                await trio.testing.wait_all_tasks_blocked()
            assert trio.current_time() - started >= 3600
            calls = await trio.to_thread.run_sync(page.js, "return window.__thrum.calls")
        finally:
            await trio.to_thread.run_sync(stop_browser, driver)

        # the page did read on the agents' behalf, the very calls that used to mark them ...
        read_for = {c["params"].get("caller") for c in calls if c["method"] in ("message.counts", "message.list")}
        assert {"carol", "erin", "dana"} <= read_for
        assert sum(c["method"] == "sync.status" for c in calls) >= 120
        # ... and nobody it watched or marked for is any "more alive" for it
        after = await _seen(daemon)
        for name in ("carol", "erin"):
            assert after[name] == before[name], (name, before[name], after[name])
        assert after["alice"] > before["alice"]  # an agent acting for itself still counts
        # The human's reply is the human acting: a message in the log, which counts on every
        # machine (issue 30: last seen is the newest event that shows an agent acting); the
        # reads and counts the page made as dana before and after it do not.
        sent = (await _rpc(daemon, "message.list", {"author_id": "dana"}))["messages"]
        assert after["dana"] == max(m["created_at"] for m in sent) > before["dana"]
        daemon.request_shutdown()
