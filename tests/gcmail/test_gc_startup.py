"""What keeps `thrum-gc-mail check` fast with a large mailbox (issue 14's target:
≤ 50 ms from process start to exit; Gas City's hooks run it on every prompt):
the provider's start-up path imports nothing heavy, and the daemon serves a
mailbox in pages of 1,000 (each page scans the mailbox once), so 1,020 unread
messages take two calls, not eleven. Timings are in scripts/bench_gcmail.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

from thrum.client import Client
from thrum.errors import ValidationError
from thrum.paths import resolve

HEAVY = ("typing", "dataclasses", "click", "trio", "anyio", "pygit2", "peewee", "orjson", "pydantic", "mcp")


def test_the_providers_start_up_path_imports_nothing_heavy():
    code = (
        "import sys\n"
        "import thrum.gcmail.main, thrum.gcmail.provider, thrum.gcmail.protocol, thrum.client\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_daemon_serves_a_mailbox_in_pages_of_a_thousand(provider):
    first = provider.send("alice", "carol", "", "m0")
    with Client(resolve(provider.repo)) as client:
        caller = client.call("message.get", {"message_id": first["id"]})["message"]["author"]["agent_id"]
        for i in range(1, 1001):
            client.call(
                "message.send",
                {"caller": caller, "content": f"m{i}", "refs": [{"type": "mention", "value": "gc_carol"}]},
            )
        page = client.call("mailbox.list", {"mailbox": "gc_carol", "unread": True, "page_size": 1000})
        assert (len(page["messages"]), page["total"], page["total_pages"]) == (1000, 1001, 2)
        rest = client.call("mailbox.list", {"mailbox": "gc_carol", "unread": True, "page_size": 1000, "page": 2})
        assert [m["body"]["content"] for m in rest["messages"]] == ["m1000"]
        with pytest.raises(ValidationError, match="page_size"):
            client.call("mailbox.list", {"mailbox": "gc_carol", "page_size": 1001})  # still bounded
