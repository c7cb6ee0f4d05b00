"""Gas City runs provider processes concurrently and does no locking: nothing may be lost."""

from __future__ import annotations

import json
import subprocess

from gc_exec import SCRIPT, Provider, env_for, go_json, messages

SENDERS = 20


def test_twenty_concurrent_sends_into_a_repository_never_set_up_lose_nothing(city):
    """The first mail of a city: twenty processes find no thrum set-up and no daemon at once."""
    repo, elsewhere = city
    procs = []
    for i in range(SENDERS):
        sender = "alice" if i % 2 else f"rig{i}/worker"  # new mailboxes registered concurrently, and a shared one
        procs.append(
            subprocess.Popen(
                [SCRIPT, "send", "mayor"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=elsewhere,
                env=env_for(repo),
            )
        )
        procs[-1].stdin.write(go_json({"from": sender, "subject": f"s{i}", "body": f"body {i}"}))
        procs[-1].stdin.close()
    sent = {}
    for i, proc in enumerate(procs):
        out = proc.stdout.read()
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err.decode()
        sent[json.loads(out)["id"]] = f"body {i}"
    assert len(sent) == SENDERS
    inbox = Provider(repo, elsewhere).inbox("mayor")
    assert {m["id"]: m["body"] for m in inbox} == sent


def test_thrum_gc_mail_is_the_same_program(provider, tmp_path):
    """`thrum gc-mail` (for people and scripts) answers like `thrum-gc-mail`, honouring --repo."""
    sent = provider.send("alice", "bob", "hi", "there")
    cli = SCRIPT.replace("thrum-gc-mail", "thrum")
    proc = subprocess.run(
        [cli, "--repo", str(provider.repo), "gc-mail", "inbox", "bob"],
        capture_output=True,
        cwd=tmp_path,
        env={k: v for k, v in provider.env.items() if k != "THRUM_REPO"},
    )
    assert proc.returncode == 0, proc.stderr
    assert [m["id"] for m in messages(proc.stdout.decode().rstrip("\n"))] == [sent["id"]]
    for tail in (["--repo", str(provider.repo)], [f"--repo={provider.repo}"]):  # after OP ARG too (issue 30)
        proc = subprocess.run(
            [cli, "gc-mail", "inbox", "bob", *tail],
            capture_output=True,
            cwd=tmp_path,
            env={k: v for k, v in provider.env.items() if k != "THRUM_REPO"},
        )
        assert proc.returncode == 0, proc.stderr
        assert [m["id"] for m in messages(proc.stdout.decode().rstrip("\n"))] == [sent["id"]]
    proc = subprocess.run([cli, "gc-mail", "no-such-op"], capture_output=True, cwd=provider.repo, env=provider.env)
    assert proc.returncode == 2


def test_thrum_agents_and_gas_city_agents_write_to_each_other(provider):
    cli = SCRIPT.replace("thrum-gc-mail", "thrum")
    env = {**provider.env, "THRUM_NAME": "alice"}

    def thrum(*args: str) -> str:
        proc = subprocess.run([cli, *args], capture_output=True, cwd=provider.repo, env=env, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    thrum("quickstart", "--name", "alice", "--role", "dev", "--quiet")
    sent = json.loads(thrum("send", "Status?", "--ref", "mention:gc_mayor", "--subject", "Hi", "--json"))
    (got,) = provider.inbox("mayor")
    assert (got["id"], got["from"], got["to"], got["subject"]) == (sent["message_id"], "@alice", "mayor", "Hi")
    reply = provider.reply(got["id"], "mayor", "RE: Hi", "All quiet")
    assert reply["to"] == "@alice"
    direct = provider.send("myrig/witness", "@alice", "", "a word")
    mine = json.loads(thrum("inbox", "--mentions", "--json"))["messages"]
    assert {m["message_id"] for m in mine} == {reply["id"], direct["id"]}
    # her thrum inbox marked them read, and her mailbox says so
    assert [(m["id"], m["read"]) for m in provider.all("@alice")] == [(reply["id"], True), (direct["id"], True)]
    assert provider.inbox("@alice") is None
