"""Building events for store tests: typed (validated) events with controlled ids and times."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from thrum import events as ev
from thrum.search_query import parse
from thrum.store import delivery, directory, projection, queries, search_index
from thrum.store.search import search_messages

BASE = datetime(2026, 2, 3, 10, 0, 0, tzinfo=timezone.utc)


def ulid_at(n: int) -> str:
    """The n-th ULID of a test: strictly increasing with n, fixed across runs."""
    return _encode((1_760_000_000_000 + n) << 80 | n)


_ALPHA = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _encode(value: int) -> str:
    out = []
    for _ in range(26):
        value, r = divmod(value, 32)
        out.append(_ALPHA[r])
    return "".join(reversed(out))


class Events:
    """An event factory: event ids and timestamps increase with every event made.

    ``at(seconds)`` pins the timestamp of the next events (for sorting tests).
    """

    def __init__(self, start: int = 0):
        self.n = start
        self.clock = BASE
        self.sessions: dict[str, str] = {}

    def _common(self, ts: str | None = None) -> dict:
        self.n += 1
        self.clock += timedelta(seconds=1)
        stamp = ts or self.clock.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.clock.microsecond // 1000:03d}Z"
        return {"event_id": ulid_at(self.n), "timestamp": stamp}

    def session(self, agent: str) -> str:
        return self.sessions.setdefault(agent, f"ses_{agent}")

    @staticmethod
    def rec(event) -> tuple[str, dict]:
        d = event.to_dict()
        return ev.stream_for(d), ev.normalise(d)

    # -- lifecycle
    def register(self, agent, role, module="core", ts=None):
        return self.rec(ev.AgentRegister(agent_id=agent, role=role, module=module, **self._common(ts)))

    def cleanup(self, agent, ts=None):
        return self.rec(ev.AgentCleanup(agent_id=agent, reason="gone", **self._common(ts)))

    def session_start(self, agent, sid=None, ts=None):
        return self.rec(ev.SessionStart(session_id=sid or self.session(agent), agent_id=agent, **self._common(ts)))

    def session_end(self, sid, agent="", ts=None):
        return self.rec(ev.SessionEnd(session_id=sid, agent_id=agent, **self._common(ts)))

    # -- messages
    def create(
        self,
        agent,
        content="hello",
        *,
        mid=None,
        mentions=(),
        scopes=(),
        refs=(),
        thread_id="",
        ts=None,
        priority="normal",
        subject="",
        ack=False,
        ack_within=0,
    ):
        tags = tuple(ev.Tag("mention", m) for m in mentions) + tuple(ev.Tag(*r) for r in refs)
        kw = {"message_id": mid} if mid else {}
        return self.rec(
            ev.MessageCreate(
                agent_id=agent,
                session_id=self.session(agent),
                thread_id=thread_id,
                body=ev.Body(content),
                scopes=tuple(ev.Tag(*s) for s in scopes),
                refs=tags,
                priority=priority,
                subject=subject,
                ack=ack,
                ack_within=ack_within,
                **kw,
                **self._common(ts),
            )
        )

    def edit(self, agent, mid, content, ts=None):
        return self.rec(
            ev.MessageEdit(
                message_id=mid,
                agent_id=agent,
                session_id=self.session(agent),
                body=ev.Body(content),
                **self._common(ts),
            )
        )

    def delete(self, agent, mid, reason="", ts=None):
        return self.rec(ev.MessageDelete(message_id=mid, agent_id=agent, reason=reason, **self._common(ts)))

    def read(self, agent, *mids, ts=None):
        return self.rec(
            ev.MessageRead(agent_id=agent, session_id=self.session(agent), message_ids=mids, **self._common(ts))
        )

    def unread(self, agent, *mids, ts=None):
        return self.rec(ev.MessageUnread(agent_id=agent, message_ids=mids, **self._common(ts)))

    def archive(self, agent, *mids, ts=None):
        return self.rec(ev.MessageArchive(agent_id=agent, message_ids=mids, **self._common(ts)))

    def delivered(self, agent, *mids, ts=None):
        return self.rec(ev.MessageDelivered(agent_id=agent, message_ids=mids, **self._common(ts)))

    def surfaced(self, agent, *mids, ts=None):
        return self.rec(ev.MessageSurfaced(agent_id=agent, message_ids=mids, via="hook test", **self._common(ts)))

    def acked(self, agent, *mids, ts=None):
        return self.rec(ev.MessageAcked(agent_id=agent, message_ids=mids, **self._common(ts)))

    def thread(self, agent, thread_id, title="t", ts=None):
        return self.rec(ev.ThreadCreate(thread_id=thread_id, title=title, created_by=agent, **self._common(ts)))

    # -- groups
    def group_create(self, name, by="admin", description="", ts=None):
        return self.rec(ev.GroupCreate(name=name, created_by=by, description=description, **self._common(ts)))

    def group_delete(self, name, by="admin", ts=None):
        return self.rec(ev.GroupDelete(name=name, deleted_by=by, **self._common(ts)))

    def member_add(self, group, value, mtype="agent", by="admin", ts=None):
        return self.rec(
            ev.GroupMemberAdd(group=group, member_type=mtype, member_value=value, agent_id=by, **self._common(ts))
        )

    def member_remove(self, group, value, mtype="agent", by="admin", ts=None):
        return self.rec(
            ev.GroupMemberRemove(group=group, member_type=mtype, member_value=value, agent_id=by, **self._common(ts))
        )


def mid(rec) -> str:
    return rec[1]["message_id"]


def fold(db, *records):
    return projection.fold(db, list(records))


def ids(result: dict) -> list[str]:
    return [m["message_id"] for m in result["messages"]]


def snapshot(db, agents, roles, groups, message_ids, *, with_issues=True) -> str:
    """Everything the read side answers about a small world, as one JSON string.

    Two databases that give the same snapshot answer every query in it the same.
    """
    out = {
        "agents": directory.list_agents(db, include_deleted=True),
        "groups": directory.list_groups(db),
        "sessions": directory.list_sessions(db),
    }
    out["members"] = {}
    for g in list(groups) + ["everyone"]:
        try:
            out["members"][g] = [directory.group_members(db, g), directory.group_members(db, g, expand=True)]
        except Exception as exc:  # NotFound
            out["members"][g] = type(exc).__name__
    filters = [
        {},
        {"include_deleted": True},
        {"include_archived": True},
        {"sort_order": "asc"},
        {"sort_by": "updated_at"},
        {"exclude_author": "@self"},
        {"mentions_of": "@self"},
        {"mentions_of": "@self", "unread_for": "@self"},
        {"unread_for": "@self", "exclude_author": "@self"},
        {"author_id": "@self"},
        {"scope": {"type": "module", "value": "a"}},
        {"ref": {"type": "issue", "value": "1"}},
    ]
    for role in roles:
        filters.append({"mention_role": role, "unread_for": "@self"})
    views = {}
    for agent in list(agents) + [None]:
        per = []
        for f in filters:
            kw = {k: (agent if v == "@self" else v) for k, v in f.items()}
            if agent is None and any(v is None for v in kw.values()):
                continue
            per.append(queries.list_messages(db, viewer=agent, page_size=100, **kw))
        if agent is not None:
            per.append(queries.counts(db, agent))
            per.append(queries.counts(db, agent, mentions_only=True))
            per.append(queries.mention_targets(db, agent))
            per.append(queries.unread_ids(db, agent))
        views[str(agent)] = per
    out["views"] = views
    msgs = {}
    for m in sorted(set(message_ids)):
        try:
            msgs[m] = [queries.get_message(db, m, viewer=agents[0] if agents else None), queries.thread_messages(db, m)]
        except Exception as exc:
            msgs[m] = type(exc).__name__
    out["messages"] = msgs
    later = "2099-01-01T00:00:00.000Z"  # every ack deadline has passed
    out["delivery"] = [delivery.delivery(db, sorted(set(message_ids)), later)]
    out["pending"] = {a: delivery.pending(db, a, limit=100, now_key=later) for a in agents}
    out["search"] = search_snapshot(db, agents, roles)
    if with_issues:
        out["issues"] = [r[0] for r in db.execute_sql("SELECT key FROM fold_issues ORDER BY key").fetchall()]
    return json.dumps(out, sort_keys=True)


SEARCHES = [
    "c*",
    "lead",
    "dev",
    "e* -c*",
    "-e*",
    "s*",
    "to:@everyone",
    "is:unread",
    "is:archived",
    "scope:module:a e*",
    "ref:issue:1",
]


def search_snapshot(db, agents, roles) -> list:
    """Every agent's results for a few searches (and the index checked against the messages)."""
    assert search_index.check(db, thorough=True) is None
    now = datetime(2026, 3, 1, tzinfo=timezone.utc)
    out = []
    for agent in list(agents) + [None]:
        for text in SEARCHES + [f"from:{a}" for a in agents] + [f"to:@{r}" for r in roles]:
            q = parse(text, now=now)
            if agent is None and q.needs_caller:
                continue
            out.append(search_messages(db, q, viewer=agent, now="2026-03-01T00:00:00.000Z", page_size=100))
    return out
