"""When local writes schedule a sync (issue 4: receipts and edits never cause a commit of their own)."""

from thrum import events as ev
from thrum.daemon.syncer import triggers_sync

SES = "ses_01M8AE0000000000000000000S"


def _d(e):
    return e.to_dict()


def test_receipts_and_edits_do_not_schedule_a_sync():
    mid = "msg_01M8AE0000000000000000000M"
    quiet = [
        _d(ev.MessageRead(agent_id="bob", message_ids=(mid,))),
        _d(ev.MessageUnread(agent_id="bob", message_ids=(mid,))),
        _d(ev.MessageArchive(agent_id="bob", message_ids=(mid,))),
        _d(ev.MessageEdit(agent_id="alice", message_id=mid, body=ev.Body("v2"))),
    ]
    assert not triggers_sync(quiet)


def test_new_messages_and_lifecycle_events_schedule_a_sync():
    assert triggers_sync([_d(ev.MessageCreate(agent_id="alice", session_id=SES, body=ev.Body("hi")))])
    assert triggers_sync([_d(ev.AgentRegister(agent_id="alice", role="implementer"))])
    assert triggers_sync([_d(ev.MessageDelete(agent_id="alice", message_id="msg_01M8AE0000000000000000000M"))])
