"""The thread.create RPC (issue 30, item 10; spec/events.md): a titled thread that
messages then join."""

from __future__ import annotations

import pytest
from realtime_helpers import start_daemon

from thrum import errors


def test_thread_create_starts_a_thread_messages_join(tmp_path):
    d = start_daemon(tmp_path)
    try:
        d.register("alice", "implementer")
        made = d.call("thread.create", {"caller": "alice", "title": "Auth review"})
        assert made["thread_id"].startswith("thr_") and made["title"] == "Auth review"
        sent = d.send("alice", "first point", thread_id=made["thread_id"])
        assert sent["thread_id"] == made["thread_id"]
        got = d.call("thread.get", {"thread_id": made["thread_id"]})
        assert [m["body"]["content"] for m in got["messages"]] == ["first point"]
        with pytest.raises(errors.ValidationError, match="invalid params: title"):
            d.call("thread.create", {"caller": "alice", "title": " "})
    finally:
        d.stop()
