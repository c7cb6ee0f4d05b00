"""The 14 operations of Gas City's exec mail provider, over the daemon's RPC.

Rules:

1. A mailbox is a thrum agent (role ``gc``, display = its Gas City address; see
   `addresses`), registered the first time it sends or is written to. Reading a
   mailbox that was never used needs no registration: it is empty.
2. A mailbox holds the messages addressed to it by name (a ``mention`` ref equal
   to the agent's name): Gas City mail has exactly one recipient, whose read and
   archive state is the message's. Mail that reaches an agent through a role,
   a group or ``@everyone`` stays in thrum's own inbox.
3. Operations on a message id (read, mark-read, mark-unread, archive, delete) act
   as the mailbox the message was addressed to: its mention refs that are agents.
4. Archive (and delete, its alias) takes a message out of the mailbox views
   (inbox, check, all, count); get and thread still show it. Archiving again fails
   with ``already archived``.
5. Every write is one event in the log, so mail, read and archive state replicate
   through sync like any thrum message.
6. The common path is one RPC: registration happens only when the daemon says it
   does not know an agent, then the call is retried.
"""

from __future__ import annotations

from .. import errors
from . import addresses, protocol

TYPE_CHECKING = False  # not typing's: the provider starts without importing typing
if TYPE_CHECKING:
    from typing import Any, Callable

    Rpc = Callable[[str, dict], Any]

PAGE = 100  # message.list's largest page


class NotFoundError(errors.ThrumError):
    """An unknown message id (printed with Gas City's ``gc-mail-error:not-found`` marker)."""


class AlreadyArchived(errors.ThrumError):
    """Archiving a message that is archived (printed with ``already archived``)."""


class Mailer:
    """The operations for one invocation; ``rpc(method, params)`` reaches the daemon."""

    def __init__(self, rpc: Rpc):
        self.rpc = rpc
        self._displays: dict[str, str | None] = {}

    # ------------------------------------------------------------------ mailboxes

    def display(self, name: str) -> str | None:
        """The address a mailbox agent was registered with (only asked for names that need it)."""
        if not addresses.needs_display(name):
            return None
        if name not in self._displays:
            try:
                agent = self.rpc("agent.get", {"name": name}).get("agent") or {}
                self._displays[name] = agent.get("display") or None
            except errors.NotFound:
                self._displays[name] = None
        return self._displays[name]

    def _register(self, name: str, address: str) -> None:
        kind = "user" if address == "human" else "agent"
        self.rpc("agent.register", {"name": name, "role": addresses.ROLE, "display": address, "kind": kind})
        self._displays[name] = address

    def _send(self, sender: str, sender_address: str, recipient: str, recipient_address: str,
              params: dict) -> dict:
        """message.send as ``sender`` to ``recipient``, registering either mailbox when the daemon does not know it."""
        params = {"caller": sender, "to": [recipient], **params}
        for _ in range(3):
            try:
                return self.rpc("message.send", params)
            except errors.IdentityError:
                if not addresses.is_mailbox(sender):
                    raise
                self._register(sender, sender_address)
            except errors.UnknownRecipient:
                if not addresses.is_mailbox(recipient):
                    raise errors.UnknownRecipient(f"no thrum agent, role or group {recipient_address}") from None
                self._register(recipient, recipient_address)
        return self.rpc("message.send", params)

    # ------------------------------------------------------------------ writing

    def send(self, to: str, payload: bytes) -> dict:
        sender_address, subject, body = protocol.parse_payload(payload)
        sender, recipient = addresses.to_name(sender_address), addresses.to_name(to)
        result = self._send(sender, sender_address, recipient, to, {"content": body, "subject": subject})
        return self._sent(result, sender_address, to, subject, body)

    def reply(self, parent_id: str, payload: bytes) -> dict:
        sender_address, subject, body = protocol.parse_payload(payload)
        parent = self._get(parent_id)
        author = parent["author"]["agent_id"]
        to = addresses.from_name(author, self.display(author))
        result = self._send(addresses.to_name(sender_address), sender_address, author, to,
                            {"content": body, "subject": subject, "reply_to": parent["message_id"]})
        return self._sent(result, sender_address, to, subject, body)

    @staticmethod
    def _sent(result: dict, sender: str, to: str, subject: str, body: str) -> dict:
        msg = {"id": result["message_id"], "from": sender, "to": to, "subject": subject, "body": body,
               "created_at": result["created_at"], "read": False, "thread_id": result.get("thread_id") or ""}
        if result.get("reply_to"):
            msg["reply_to"] = result["reply_to"]
        return {k: v for k, v in msg.items() if v != "" or k in protocol.REQUIRED}

    # ------------------------------------------------------------------ mailbox views

    def _list(self, params: dict) -> tuple[list[dict], dict]:
        """Every message a message.list query matches, oldest first (all pages)."""
        items: list[dict] = []
        page = 1
        while True:
            result = self.rpc("message.list", {**params, "page": page, "page_size": PAGE,
                                               "sort_by": "created_at", "sort_order": "asc"})
            items += result.get("messages") or []
            if page >= (result.get("total_pages") or 1):
                return items, result
            page += 1

    def inbox(self, recipient: str) -> list[dict]:
        """Unread, un-archived mail of a mailbox (check is the same: listing marks nothing read)."""
        name = addresses.to_name(recipient)
        items, _ = self._list({"ref": {"type": "mention", "value": name}, "unread_for_agent": name})
        return [protocol.message(i, display=self.display, to=recipient, read=False) for i in items]

    check = inbox

    def all(self, recipient: str) -> list[dict]:
        name = addresses.to_name(recipient)
        try:
            items, _ = self._list({"ref": {"type": "mention", "value": name}, "caller": name})
        except errors.IdentityError:
            return []  # a mailbox that was never used
        return [protocol.message(i, display=self.display, to=recipient) for i in items]

    def count(self, recipient: str) -> dict:
        name = addresses.to_name(recipient)
        try:
            result = self.rpc("message.list", {"ref": {"type": "mention", "value": name}, "caller": name,
                                               "page": 1, "page_size": 1})
        except errors.IdentityError:
            return {"total": 0, "unread": 0}
        return {"total": int(result.get("total") or 0), "unread": int(result.get("unread") or 0)}

    def thread(self, key: str) -> list[dict]:
        """A thread oldest first, by thread id or the id of any message in it; unknown: empty."""
        try:
            result = self.rpc("message.thread", {"thread_id": key})
        except (errors.NotFound, errors.ValidationError):
            return []
        return [protocol.message(i, display=self.display) for i in result.get("messages") or []]

    # ------------------------------------------------------------------ one message

    def _get(self, message_id: str) -> dict:
        try:
            result = self.rpc("message.get", {"message_id": message_id})
        except (errors.NotFound, errors.ValidationError):
            raise NotFoundError(f"no message {message_id!r}") from None
        return result["message"]

    def get(self, message_id: str) -> dict:
        return protocol.message(self._get(message_id), display=self.display)

    def _as_recipients(self, msg: dict, method: str) -> list[tuple[str, Any]]:
        """``method`` on the message for each mailbox it was addressed to: [(name, result or error)]."""
        outcomes: list[tuple[str, Any]] = []
        for name in protocol.mentions(msg.get("refs")):
            try:
                outcomes.append((name, self.rpc(method, {"caller": name, "message_ids": [msg["message_id"]]})))
            except errors.IdentityError:
                continue  # a role or group mention, not a mailbox
            except errors.Conflict as exc:
                outcomes.append((name, exc))
        if not outcomes:
            raise errors.ThrumError(f"message {msg['message_id']} is not addressed to any mailbox")
        return outcomes

    def read(self, message_id: str) -> dict:
        msg = self._get(message_id)
        self._as_recipients(msg, "message.markRead")
        return protocol.message(msg, display=self.display, read=True)

    def mark_read(self, message_id: str) -> None:
        self._as_recipients(self._get(message_id), "message.markRead")

    def mark_unread(self, message_id: str) -> None:
        self._as_recipients(self._get(message_id), "message.markUnread")

    def archive(self, message_id: str) -> None:
        outcomes = self._as_recipients(self._get(message_id), "message.archive")
        if all(isinstance(result, errors.Conflict) for _, result in outcomes):
            raise AlreadyArchived(f"message {message_id} is already archived")

    delete = archive
