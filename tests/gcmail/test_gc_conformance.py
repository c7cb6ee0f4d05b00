"""Conformance of `thrum-gc-mail` with Gas City's exec mail provider protocol.

Every behaviour of spec/gascity-exec-provider.md (the operations table and the
paragraph under it), with the provider run exactly as gc runs it
(gc_exec.Provider): a subprocess per call, argv, stdin JSON, exit codes and the
stderr markers. Set-up, addresses and large mailboxes each get a fresh repository;
the mailbox operations share one city whose daemon starts once (``mail``), each
test with mailboxes no other test writes to (``boxes``), as gc's agents have.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta, timezone

import pytest

from fixtures.repos.builders import make_repo
from gc_exec import Provider, ProviderError, go_json
from thrum import lifecycle
from thrum.client import Client
from thrum.paths import resolve


def ids(msgs) -> list[str]:
    return [m["id"] for m in msgs or []]


@pytest.fixture(scope="module")
def mail(tmp_path_factory) -> Provider:
    """One city for the module's mailbox tests, set up and started once (ensure-running)."""
    base = tmp_path_factory.mktemp("post-office")
    make_repo(base / "city")
    (base / "elsewhere").mkdir()
    p = Provider(base / "city", base / "elsewhere")
    p.ensure_running()
    yield p
    lifecycle.stop(resolve(p.repo))


_tests = itertools.count(1)


@pytest.fixture
def boxes():
    """Addresses of this test's own in the shared city: ``boxes("alice", "bob")`` gives
    ``("alice-7", "bob-7")``, so no test sees another's mail."""
    n = next(_tests)
    return lambda *names: tuple(f"{name}-{n}" for name in names)


# ---------------------------------------------------------------------------- ensure-running


def test_ensure_running_sets_up_a_bare_git_repository_and_starts_the_daemon(city):
    repo, elsewhere = city
    p = Provider(repo, elsewhere)
    proc = p.raw("ensure-running")
    assert proc.returncode == 0, proc.stderr
    assert (repo / ".thrum").is_dir()
    assert p.raw("ensure-running").returncode == 0  # again: nothing to do
    assert p.inbox("bob") is None


def test_operations_start_the_daemon_without_ensure_running(city):
    repo, elsewhere = city
    p = Provider(repo, elsewhere)
    sent = p.send("alice", "bob", "first", "no ensure-running before me")
    assert ids(p.inbox("bob")) == [sent["id"]]


def test_the_repository_comes_from_the_working_directory_only_once_set_up_for_mail(city):
    repo, elsewhere = city
    inside = repo / "sub" / "dir"
    inside.mkdir(parents=True)
    p = Provider(repo, inside)
    del p.env["THRUM_REPO"]
    # an unrelated checkout (issue 31): never set up from where the provider happens to run
    proc = p.raw("send", "bob", stdin=go_json({"from": "alice", "subject": "", "body": "lost?"}))
    assert proc.returncode == 1 and proc.stderr.decode().count("\n") == 1
    assert "THRUM_REPO" in proc.stderr.decode() and not (repo / ".thrum").exists()
    elsewhere_p = Provider(repo, elsewhere)  # THRUM_REPO names it: set up for the city's mail
    elsewhere_p.ensure_running()
    sent = p.send("alice", "bob", "", "found from the working directory")
    assert ids(elsewhere_p.inbox("bob")) == [sent["id"]]


def test_outside_any_repository_without_thrum_repo_is_one_clear_error(city):
    repo, elsewhere = city
    p = Provider(repo, elsewhere)
    del p.env["THRUM_REPO"]
    proc = p.raw("inbox", "bob")
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and "THRUM_REPO" in err


# ---------------------------------------------------------------------------- send


def test_send_returns_the_new_message(mail, boxes):
    alice, bob = boxes("alice", "bob")
    before = datetime.now(timezone.utc) - timedelta(minutes=1)
    m = mail.send(alice, bob, "Greetings", "hello")
    after = datetime.now(timezone.utc) + timedelta(minutes=1)
    assert m["id"]
    assert (m["from"], m["to"], m["subject"], m["body"], m["read"]) == (alice, bob, "Greetings", "hello", False)
    assert before <= m["created"] <= after
    assert m["thread_id"]


def test_send_gives_unique_ids_and_a_new_thread_each_time(mail, boxes):
    alice, bob = boxes("alice", "bob")
    a = mail.send(alice, bob, "", "first")
    b = mail.send(alice, bob, "", "second")
    assert a["id"] != b["id"]
    assert a["thread_id"] != b["thread_id"]


def test_send_decodes_go_escapes_and_keeps_text_exactly(mail, boxes):
    alice, bob = boxes("alice", "bob")
    body = 'a <b> & c\n\tline two \u00e9\u4e2d\U0001f600 "quoted" \\ back'
    raw = go_json({"from": alice, "subject": "<urgent> & more", "body": body})
    assert b"\\u003c" in raw and not raw.endswith(b"\n")
    m = json.loads(mail.run("send", bob, stdin=raw))
    assert (m["subject"], m["body"]) == ("<urgent> & more", body)
    got = mail.get(m["id"])
    assert (got["subject"], got["body"]) == ("<urgent> & more", body)


def test_send_with_an_empty_subject_and_body(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "", "")
    assert (m["subject"], m["body"]) == ("", "")
    assert mail.get(m["id"])["body"] == ""


def test_send_with_bad_stdin_fails_with_one_line(city):
    p = Provider(*city)
    for stdin in (
        b"",
        b"not json",
        b"[1]",
        b'{"from": "", "subject": "", "body": "x"}',
        b'{"from": "alice", "subject": 3, "body": "x"}',
        b"\xff\xfe",
    ):
        for op in ("send", "reply"):
            proc = p.raw(op, "bob", stdin=stdin)
            assert proc.returncode == 1, (op, stdin)
            assert proc.stdout == b""
            assert proc.stderr.decode().count("\n") == 1
    assert not (city[0] / ".thrum").exists()  # refused before anything was written


# ---------------------------------------------------------------------------- addresses

ADDRESS_PAIRS = [
    ("human", "mayor"),
    ("myrig/witness", "myrig/polecats/nux"),
    ("gc-42", "rig.name/agent_name"),
    ("Mayor Of Town", "ünïcødé/rig"),
    ("a" * 200, "x--y//z"),
]


def test_addresses_round_trip_in_from_and_to(provider):
    for sender, recipient in ADDRESS_PAIRS:
        m = provider.send(sender, recipient, "s", "b")
        assert (m["from"], m["to"]) == (sender, recipient)
        (listed,) = provider.inbox(recipient)
        assert (listed["from"], listed["to"]) == (sender, recipient)
        got = provider.get(m["id"])
        assert (got["from"], got["to"]) == (sender, recipient)
        r = provider.reply(m["id"], recipient, "re", "back")
        assert (r["from"], r["to"]) == (recipient, sender)
        assert ids(provider.inbox(sender)) == [r["id"]]


def test_addresses_that_differ_only_in_spelling_are_different_mailboxes(provider):
    names = ["mayor", "Mayor", "may-or", "may_or", "may.or", "may/or", "may or"]
    for n in names:
        provider.send("alice", n, "", f"for {n}")
    for n in names:
        (only,) = provider.inbox(n)
        assert only["body"] == f"for {n}" and only["to"] == n


# ---------------------------------------------------------------------------- inbox, check, all


def test_an_empty_mailbox_prints_nothing(mail, boxes):
    (nobody,) = boxes("nobody")
    for op in ("inbox", "check", "all", "thread"):
        proc = mail.raw(op, nobody)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b""), op


def test_inbox_holds_only_the_recipients_unread_mail(mail, boxes):
    alice, bob, charlie = boxes("alice", "bob", "charlie")
    for_bob = mail.send(alice, bob, "", "for bob")
    mail.send(alice, charlie, "", "for charlie")
    (m,) = mail.inbox(bob)
    assert (m["id"], m["to"], m["read"]) == (for_bob["id"], bob, False)
    assert mail.inbox(alice) is None  # the sender's mailbox does not hold what it sent


def test_inbox_and_check_do_not_mark_read(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "", "peek")
    assert ids(mail.check(bob)) == [m["id"]]
    assert ids(mail.inbox(bob)) == [m["id"]]
    assert ids(mail.check(bob)) == [m["id"]]
    assert mail.count(bob) == (1, 1)


def test_check_is_the_inbox(mail, boxes):
    alice, bob, carol = boxes("alice", "bob", "carol")
    a = mail.send(alice, bob, "", "one")
    b = mail.send(carol, bob, "", "two")
    mail.mark_read(a["id"])
    assert ids(mail.check(bob)) == ids(mail.inbox(bob)) == [b["id"]]


def test_all_lists_read_and_unread_but_not_archived(mail, boxes):
    alice, bob = boxes("alice", "bob")
    unread = mail.send(alice, bob, "", "one")
    read = mail.send(alice, bob, "", "two")
    gone = mail.send(alice, bob, "", "three")
    mail.mark_read(read["id"])
    mail.archive(gone["id"])
    listed = mail.all(bob)
    assert sorted(ids(listed)) == sorted([unread["id"], read["id"]])
    assert {m["id"]: m["read"] for m in listed} == {unread["id"]: False, read["id"]: True}


def test_listings_are_oldest_first_and_sortable_by_created_at_then_id(mail, boxes):
    alice, bob = boxes("alice", "bob")
    sent = [mail.send(alice, bob, "", f"n{i}") for i in range(3)]
    listed = mail.inbox(bob)
    assert ids(listed) == ids(sent)
    assert sorted(listed, key=lambda m: (m["created"], m["id"])) == listed


def test_a_mailbox_with_many_messages_lists_them_all(provider):
    first = provider.send("alice", "bob", "", "n0")  # registers alice's agent here; the rest straight over RPC
    sender = lifecycle.call(resolve(provider.repo), "message.get", {"message_id": first["id"]})
    caller = sender["message"]["author"]["agent_id"]
    n = 1020  # more than one page of the daemon's largest mailbox page (1,000)
    with Client(resolve(provider.repo)) as client:
        for i in range(1, n):
            client.call(
                "message.send", {"caller": caller, "content": f"n{i}", "refs": [{"type": "mention", "value": "gc_bob"}]}
            )
    for listed in (provider.inbox("bob"), provider.check("bob")):
        assert [m["body"] for m in listed] == [f"n{i}" for i in range(n)]
        assert len({m["id"] for m in listed}) == n
    assert provider.count("bob") == (n, n)


# ---------------------------------------------------------------------------- get, read


def test_get_returns_the_message_without_marking_it_read(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "Hi", "body")
    got = mail.get(m["id"])
    assert {k: got[k] for k in ("id", "from", "to", "subject", "body", "read", "thread_id", "created_at")} == {
        k: m[k] for k in ("id", "from", "to", "subject", "body", "read", "thread_id", "created_at")
    }
    assert ids(mail.inbox(bob)) == [m["id"]]


def test_read_marks_read_and_the_message_stays_retrievable(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "Sub", "read me")
    got = mail.read(m["id"])
    assert (got["id"], got["from"], got["to"], got["body"], got["read"]) == (m["id"], alice, bob, "read me", True)
    assert mail.inbox(bob) is None
    again = mail.get(m["id"])
    assert (again["body"], again["read"]) == ("read me", True)
    assert mail.count(bob) == (1, 0)


def test_unknown_ids_fail_with_the_not_found_marker(mail, boxes):
    (bob,) = boxes("bob")
    for op in ("get", "read", "mark-read", "mark-unread", "reply"):
        stdin = go_json({"from": bob, "subject": "", "body": "x"}) if op == "reply" else b""
        for unknown in ("nonexistent", "msg_01JD5QA0B1C2D3E4F5G6H7J8K9"):
            with pytest.raises(ProviderError) as info:
                mail.run(op, unknown, stdin=stdin)
            assert info.value.not_found and info.value.code == 1, (op, unknown)
            assert "\n" not in info.value.text


# ---------------------------------------------------------------------------- mark-read, mark-unread


def test_mark_read_prints_nothing_and_takes_the_message_out_of_the_inbox(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "", "mark me")
    assert mail.mark_read(m["id"]) == ""
    assert mail.inbox(bob) is None
    assert mail.mark_read(m["id"]) == ""  # again: still fine


def test_mark_unread_puts_the_message_back_into_the_inbox(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "", "toggle")
    mail.read(m["id"])
    assert mail.mark_unread(m["id"]) == ""
    assert ids(mail.inbox(bob)) == [m["id"]]
    assert mail.get(m["id"])["read"] is False


# ---------------------------------------------------------------------------- archive, delete


def test_archive_and_delete_take_the_message_out_of_every_mailbox_view(mail, boxes):
    alice, bob = boxes("alice", "bob")
    kept = mail.send(alice, bob, "", "keep me")
    for op in ("archive", "delete"):
        m = mail.send(alice, bob, "", f"{op} me")
        assert mail.run(op, m["id"]) == ""
        assert ids(mail.inbox(bob)) == ids(mail.check(bob)) == ids(mail.all(bob)) == [kept["id"]]
        assert mail.count(bob) == (1, 1)
        assert mail.get(m["id"])["body"] == f"{op} me"  # history stays retrievable


def test_archiving_again_fails_with_already_archived_and_an_unknown_id_without(mail, boxes):
    alice, bob = boxes("alice", "bob")
    for first, second in (("archive", "archive"), ("delete", "delete"), ("archive", "delete"), ("delete", "archive")):
        m = mail.send(alice, bob, "", "double")
        mail.run(first, m["id"])
        with pytest.raises(ProviderError) as info:
            mail.run(second, m["id"])
        assert info.value.already_archived and info.value.code == 1, (first, second)
    for op in ("archive", "delete"):
        with pytest.raises(ProviderError) as info:
            mail.run(op, "nonexistent")
        assert not info.value.already_archived and info.value.code == 1


def test_archive_many_in_any_order_with_one_already_archived(mail, boxes):
    alice, bob = boxes("alice", "bob")
    sent = [mail.send(alice, bob, "", "batch") for _ in range(3)]
    mail.archive(sent[1]["id"])
    outcomes = []
    for m in (sent[2], sent[0], sent[1]):  # gc's ArchiveMany loops over Archive
        try:
            mail.archive(m["id"])
            outcomes.append(None)
        except ProviderError as exc:
            outcomes.append("already" if exc.already_archived else exc.text)
    assert outcomes == [None, None, "already"]
    assert mail.inbox(bob) is None


# ---------------------------------------------------------------------------- reply, thread


def test_reply_goes_to_the_parents_sender_in_the_same_thread(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "Hello", "first")
    r = mail.reply(m["id"], bob, "RE: Hello", "reply")
    assert (r["from"], r["to"], r["subject"], r["body"]) == (bob, alice, "RE: Hello", "reply")
    assert r["thread_id"] == m["thread_id"] and r["reply_to"] == m["id"] and r["id"] != m["id"]
    assert ids(mail.inbox(alice)) == [r["id"]]
    got = mail.get(r["id"])
    assert (got["reply_to"], got["thread_id"], got["to"]) == (m["id"], m["thread_id"], alice)


def test_thread_by_thread_id_or_any_message_id_oldest_first(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "Hello", "first")
    r1 = mail.reply(m["id"], bob, "", "second")
    r2 = mail.reply(r1["id"], alice, "", "third")
    mail.send(alice, bob, "", "another thread")
    expected = [m["id"], r1["id"], r2["id"]]
    for key in (m["thread_id"], m["id"], r1["id"], r2["id"]):
        assert ids(mail.thread(key)) == expected, key
    listed = mail.thread(m["thread_id"])
    assert [(x["from"], x["to"]) for x in listed] == [(alice, bob), (bob, alice), (alice, bob)]


def test_thread_shows_each_messages_read_state_and_archived_messages(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "", "first")
    r = mail.reply(m["id"], bob, "", "second")
    mail.read(m["id"])
    mail.archive(r["id"])
    assert [(x["id"], x["read"]) for x in mail.thread(m["thread_id"])] == [(m["id"], True), (r["id"], False)]


def test_an_unknown_thread_is_empty_not_an_error(mail):
    for key in ("nonexistent-thread", "thr_01JD5QA0B1C2D3E4F5G6H7J8K9", "msg_01JD5QA0B1C2D3E4F5G6H7J8K9"):
        proc = mail.raw("thread", key)
        assert (proc.returncode, proc.stdout) == (0, b""), key


# ---------------------------------------------------------------------------- count


def test_count_gives_total_and_unread(mail, boxes):
    alice, bob = boxes("alice", "bob")
    mail.send(alice, bob, "", "msg1")
    m2 = mail.send(alice, bob, "", "msg2")
    mail.mark_read(m2["id"])
    assert mail.count(bob) == (2, 1)
    assert json.loads(mail.run("count", bob)) == {"total": 2, "unread": 1}


def test_count_of_an_empty_mailbox_is_zero(mail, boxes):
    (nobody,) = boxes("nobody")
    assert json.loads(mail.run("count", nobody)) == {"total": 0, "unread": 0}


# ---------------------------------------------------------------------------- the protocol's edges


def test_an_unknown_operation_exits_2_with_no_output(city):
    p = Provider(*city)
    for op in ("frobnicate", "", "INBOX"):
        proc = p.raw(op, "x")
        assert proc.returncode == 2 and proc.stdout == b"", op
    assert not (city[0] / ".thrum").exists()  # nothing was set up for it


def test_a_wrong_number_of_arguments_fails_never_exit_2(city):
    p = Provider(*city)
    for args in (("inbox",), ("get",), ("send",), ("ensure-running", "x"), ("count", "a", "b")):
        proc = p.raw(*args, stdin=go_json({"from": "a", "subject": "", "body": ""}))
        assert proc.returncode == 1 and proc.stdout == b"", args
        assert proc.stderr.decode().count("\n") == 1


def test_stdin_is_not_read_by_other_operations(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "", "x")
    proc = mail.raw("get", m["id"], stdin=b"this is not for get")
    assert proc.returncode == 0 and json.loads(proc.stdout)["id"] == m["id"]


def test_output_is_one_json_document_on_one_line(mail, boxes):
    alice, bob = boxes("alice", "bob")
    m = mail.send(alice, bob, "multi\nline", "body\nwith\nlines")
    for args in (("get", m["id"]), ("inbox", bob), ("count", bob), ("thread", m["id"])):
        out = mail.raw(*args).stdout
        assert out.count(b"\n") == 1 and out.endswith(b"\n"), args
        json.loads(out)


def test_send_inbox_read_archive_lifecycle(mail, boxes):
    alice, bob = boxes("alice", "bob")
    sent = mail.send(alice, bob, "", "lifecycle")
    assert ids(mail.inbox(bob)) == [sent["id"]]
    assert mail.read(sent["id"])["read"] is True
    assert mail.inbox(bob) is None
    assert ids(mail.all(bob)) == [sent["id"]]
    mail.archive(sent["id"])
    assert mail.all(bob) is None
    assert mail.count(bob) == (0, 0)


def test_mail_to_oneself_arrives_unread_and_is_marked_like_any_other(mail, boxes):
    """gc handoffs: an agent mails its own next session."""
    (mayor,) = boxes("mayor")
    m = mail.send(mayor, mayor, "handoff", "where I left off")
    (got,) = mail.inbox(mayor)
    assert (got["id"], got["read"]) == (m["id"], False)
    assert mail.count(mayor) == (1, 1)
    assert mail.read(m["id"])["read"] is True
    assert mail.inbox(mayor) is None and mail.count(mayor) == (1, 0)
    mail.mark_unread(m["id"])
    assert ids(mail.inbox(mayor)) == [m["id"]]
    mail.archive(m["id"])
    assert mail.all(mayor) is None
    with pytest.raises(ProviderError) as info:
        mail.delete(m["id"])
    assert info.value.already_archived


def test_with_autostart_off_nothing_is_set_up_or_started(city):
    p = Provider(*city, THRUM_NO_AUTOSTART="1")
    proc = p.raw("inbox", "bob")
    assert proc.returncode == 1 and proc.stdout == b""
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and "THRUM_NO_AUTOSTART" in err
    assert not (city[0] / ".thrum").exists()
