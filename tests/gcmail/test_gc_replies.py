"""Thrum agents answering Gas City mail (issue 30, item 9): a `thrum reply` to mail
from a Gas City agent reaches that agent's mailbox (the exec spec's reply rule:
addressed to the parent's sender), not the per-machine agent that wrote it."""

from __future__ import annotations

import json
import subprocess

from gc_exec import SCRIPT


def test_a_thrum_reply_to_gas_city_mail_reaches_the_senders_mailbox(provider):
    cli = SCRIPT.replace("thrum-gc-mail", "thrum")
    env = {**provider.env, "THRUM_NAME": "alice"}

    def thrum(*args: str) -> str:
        proc = subprocess.run([cli, *args], capture_output=True, cwd=provider.repo, env=env, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    thrum("quickstart", "--name", "alice", "--role", "dev", "--quiet")
    asked = provider.send("mayor", "@alice", "Status?", "how is the build")
    answer = json.loads(thrum("reply", asked["id"], "green since noon", "--json"))
    got = provider.inbox("mayor")
    assert got is not None and [m["id"] for m in got] == [answer["message_id"]], got
    assert got[0]["from"] == "@alice" and got[0]["reply_to"] == asked["id"]
    assert provider.count("mayor") == (1, 1)
