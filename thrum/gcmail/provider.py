"""The 14 operations of Gas City's exec mail provider, over the daemon's RPC.

Rules:

1. Mail to an address mentions its mailbox (`addresses.mailbox`) by exact name. A
   mailbox lists (``mailbox.list``) the live mail that mentions it; mail reaching an
   agent through a role, a group or ``@everyone`` stays in thrum's own inbox.
2. On this machine an address acts through its agent (`addresses.agent`: role
   ``gc``, module = its mailbox, display = the address), registered the first time
   the daemon says it does not know it. Reading a mailbox registers nothing.
3. Read and archive state is the mailbox's, shared by its agents on every machine
   (thrum.store.mailboxes): read by the latest mark, archived by any. Operations
   on a message id act for the mailbox the message was sent to.
4. Archive (and delete, its alias) takes a message out of the mailbox views
   (inbox, check, all, count); get and thread still show it. Archiving again fails
   with ``already archived``.
5. Every write is one event in the log, so mail, read and archive state replicate
   through sync like any thrum message.
"""

from __future__ import annotations

from .. import errors
from . import addresses, protocol

TYPE_CHECKING = False  # not typing's: the provider starts without importing typing
if TYPE_CHECKING:
    from typing import Any, Callable

    Rpc = Callable[[str, dict[str, Any]], Any]

PAGE = 1000  # the largest mailbox.list page the daemon serves (one scan of the mailbox per page)


class NotFoundError(errors.ThrumError):
    """An unknown message id (printed with Gas City's ``gc-mail-error:not-found`` marker)."""


class AlreadyArchived(errors.ThrumError):
    """Archiving a message that is archived (printed with ``already archived``)."""


class Mailer:
    """The operations for one invocation.

    ``rpc(method, params)`` reaches the daemon; ``tag()`` gives this machine's
    replica tag (asked only when something has to be written).
    """

    def __init__(self, rpc: Rpc, tag: Callable[[], str], lock: Callable[[], Any] | None = None):
        self.rpc = rpc
        self._tag = tag
        self._lock = lock
        self._displays: dict[str, str | None] = {}
        self._addresses: dict[str, str] = {}  # name -> address, for this invocation (a listing repeats names)

    # ------------------------------------------------------------------ names

    def address(self, name: str) -> str:
        """The Gas City address of a mailbox or agent name (asking the daemon only when the name does not say)."""
        known = self._addresses.get(name)
        if known is None:
            if not addresses.needs_display(name):
                known = addresses.address_of(name)
            else:
                if name not in self._displays:
                    self._displays[name] = self._display(name)
                known = addresses.address_of(name, self._displays[name])
            self._addresses[name] = known
        return known

    def _display(self, name: str) -> str | None:
        params = {"name": name} if not addresses.is_mailbox(name) else None
        if params is not None:
            try:
                return (self.rpc("agent.get", params).get("agent") or {}).get("display") or None
            except errors.NotFound:
                return None
        agents = self.rpc("agent.list", {"role": addresses.ROLE, "module": name}).get("agents") or []
        return next((a["display"] for a in agents if a.get("display")), None)

    def _agent(self, box: str, clerk: bool = False) -> str:
        return addresses.agent(box, self._tag(), clerk=clerk)

    def _act(self, address: str, box: str, method: str, params: dict[str, Any], *, clerk: bool = False) -> Any:
        """``method`` as this machine's agent (or clerk) for mailbox ``box`` (of ``address``),
        registering it if needed."""
        name = self._agent(box, clerk)
        params = {"caller": name, **params}
        try:
            return self.rpc(method, params)
        except errors.IdentityError:
            if not addresses.is_mailbox(box):
                raise  # a thrum agent acts for itself, or not at all
        self._register(address, box, clerk)
        return self.rpc(method, params)

    def _register(self, address: str, box: str, clerk: bool = False) -> None:
        """Register this machine's agent (or clerk) for the mailbox (no event when it is already registered so).

        Under ``lock`` (one provider process at a time): concurrent first calls for
        one address then make one registration, not one each.
        """
        name = self._agent(box, clerk)
        kind = "user" if address == "human" else "agent"
        params = {"name": name, "role": addresses.ROLE, "module": box, "display": address, "kind": kind}
        if self._lock is None:
            self.rpc("agent.register", params)
        else:
            with self._lock():
                self.rpc("agent.register", params)
        self._displays[name] = address
        self._addresses.pop(name, None)

    # ------------------------------------------------------------------ writing

    def send(self, to: str, payload: bytes) -> dict[str, Any]:
        sender, subject, body = protocol.parse_payload(payload)
        box = addresses.mailbox(to)
        result = self._send(sender, box, {"content": body, "subject": subject})
        if addresses.needs_display(box):  # a mailbox whose name does not spell its address: keep it
            self._register(to, box)
        return self._sent(result, sender, to, subject, body)

    def reply(self, parent_id: str, payload: bytes) -> dict[str, Any]:
        sender, subject, body = protocol.parse_payload(payload)
        parent = self._get(parent_id)
        author = parent["author"]["agent_id"]
        box = addresses.mailbox_of(author) or self._module(author)
        to = self.address(author)
        result = self._send(sender, box, {"content": body, "subject": subject, "reply_to": parent["message_id"]})
        return self._sent(result, sender, to, subject, body)

    def _send(self, sender: str, box: str, params: dict[str, Any]) -> dict[str, Any]:
        refs = [{"type": "mention", "value": box}]
        # Gas City mail may be empty (subject and body both optional in its protocol)
        sent: dict[str, Any] = self._act(
            sender, addresses.mailbox(sender), "message.send", {**params, "refs": refs, "allow_empty": True}
        )
        return sent

    def _module(self, name: str) -> str:
        try:
            return (self.rpc("agent.get", {"name": name}).get("agent") or {}).get("module") or name
        except errors.NotFound:
            return name

    @staticmethod
    def _sent(result: dict[str, Any], sender: str, to: str, subject: str, body: str) -> dict[str, Any]:
        msg = {
            "id": result["message_id"],
            "from": sender,
            "to": to,
            "subject": subject,
            "body": body,
            "created_at": result["created_at"],
            "read": False,
        }
        if result.get("thread_id"):
            msg["thread_id"] = result["thread_id"]
        if result.get("reply_to"):
            msg["reply_to"] = result["reply_to"]
        return msg

    # ------------------------------------------------------------------ mailbox views

    def _mailbox(self, recipient: str, *, unread: bool) -> list[dict[str, Any]]:
        """Every message of the recipient's mailbox (only unread ones with ``unread``), oldest first."""
        box = addresses.mailbox(recipient)
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            result = self.rpc("mailbox.list", {"mailbox": box, "unread": unread, "page": page, "page_size": PAGE})
            items += result.get("messages") or []
            if page >= (result.get("total_pages") or 1):
                break
            page += 1
        return [protocol.message(i, address=self.address, to=recipient, read=bool(i.get("is_read"))) for i in items]

    def inbox(self, recipient: str) -> list[dict[str, Any]]:
        """Unread, un-archived mail (check is the same: listing marks nothing read)."""
        return self._mailbox(recipient, unread=True)

    check = inbox

    def all(self, recipient: str) -> list[dict[str, Any]]:
        return self._mailbox(recipient, unread=False)

    def count(self, recipient: str) -> dict[str, Any]:
        result = self.rpc("mailbox.list", {"mailbox": addresses.mailbox(recipient), "page": 1, "page_size": 1})
        return {"total": int(result.get("total") or 0), "unread": int(result.get("unread") or 0)}

    def thread(self, key: str) -> list[dict[str, Any]]:
        """A thread oldest first, by thread id or the id of any message in it; unknown: empty."""
        try:
            result = self.rpc("message.thread", {"thread_id": key, "mailbox_state": True})
        except (errors.NotFound, errors.ValidationError):
            return []
        return [protocol.message(i, address=self.address) for i in result.get("messages") or []]

    # ------------------------------------------------------------------ one message

    def _get(self, message_id: str) -> dict[str, Any]:
        try:
            result = self.rpc("message.get", {"message_id": message_id, "mailbox_state": True})
        except (errors.NotFound, errors.ValidationError):
            raise NotFoundError(f"no message {message_id!r}") from None
        message: dict[str, Any] = result["message"]
        return message

    def get(self, message_id: str) -> dict[str, Any]:
        return protocol.message(self._get(message_id), address=self.address)

    def _mark(self, msg: dict[str, Any], method: str) -> None:
        """``method`` on the message, acting for the mailbox it was sent to."""
        box = protocol.first_mention(msg.get("refs"))
        if not box:
            raise errors.ThrumError(f"message {msg['message_id']} is not addressed to a mailbox")
        own = addresses.is_mailbox(box) and msg["author"]["agent_id"] == self._agent(box)
        try:  # mail to oneself is marked by the clerk: thrum never lets an author mark its own message
            self._act(
                self.address(box), box, method, {"message_ids": [msg["message_id"]], "mailbox_state": True}, clerk=own
            )
        except errors.IdentityError:
            raise errors.ThrumError(
                f"message {msg['message_id']} is addressed to @{box}, which no agent of this machine acts for"
            ) from None

    def read(self, message_id: str) -> dict[str, Any]:
        msg = self._get(message_id)
        if not msg["mailbox"]["read"]:
            self._mark(msg, "message.markRead")
        return protocol.message(msg, address=self.address, read=True)

    def mark_read(self, message_id: str) -> None:
        msg = self._get(message_id)
        if not msg["mailbox"]["read"]:
            self._mark(msg, "message.markRead")

    def mark_unread(self, message_id: str) -> None:
        msg = self._get(message_id)
        if msg["mailbox"]["read"]:
            self._mark(msg, "message.markUnread")

    def archive(self, message_id: str) -> None:
        msg = self._get(message_id)
        if msg["mailbox"]["archived"]:
            raise AlreadyArchived(f"message {message_id} is already archived")
        try:
            self._mark(msg, "message.archive")
        except errors.Conflict:
            raise AlreadyArchived(f"message {message_id} is already archived") from None

    delete = archive
