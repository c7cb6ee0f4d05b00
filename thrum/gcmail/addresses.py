"""Gas City addresses ⇄ thrum names (pure): mailboxes, and the agents that act for them.

Gas City addresses are arbitrary strings (``human``, ``mayor``, ``myrig/witness``,
``gc-42``); thrum names are ``[a-z0-9_]{1,64}``. An address has a *mailbox*: the
name its mail mentions, the same on every machine (deterministic, injective, no
shared table). An agent's key never leaves its machine, so on each machine the
address acts (sends, marks read, archives) through its own *agent* there, named
from the mailbox and the machine's replica tag, registered on first use with
role ``gc`` and module = the mailbox (thrum.store.mailboxes shares the state).

Rules:

1. Plain addresses, runs of ``[a-z0-9]`` joined by single ``-``, ``/``, ``.`` or
   ``_``, have the mailbox ``gc_`` + the address with each separator written as a
   run of 1, 2, 3 or 4 underscores: ``myrig/witness`` → ``gc_myrig__witness``,
   ``gc-42`` → ``gc_gc_42``. Separators are never adjacent in a plain address, so
   the runs decode unambiguously: the name alone gives the address back.
2. Every other address (capitals, other characters, doubled or edge separators,
   too long) has ``gcx_`` + a readable slug + ``_`` + 16 base32 characters of its
   SHA-256 (80 bits: a collision needs ~2^40 addresses); its agents' ``display``
   gives the address back.
3. ``@name``, where ``name`` is a thrum name (not reserved, not spelt like rules 1,
   2 or 4 produce), is the thrum agent, role or group ``name`` itself, as mailbox
   and as the one that acts: Gas City agents write to thrum agents, and mail from a
   thrum agent ``alice`` shows as from ``@alice``.
4. The agent of mailbox ``gc_X`` on the machine with replica tag ``T`` (8 characters
   of ``[a-z2-7]``) is ``gcr_T_X``; of ``gcx_X``, ``gcr_T__X``; when that is longer
   than 64 characters, ``gcr_T___`` + 20 base32 characters of the mailbox's SHA-256.
   The first two give their mailbox back; all have it as their module. Its *clerk*
   (``gck_`` instead of ``gcr_``) marks mail the agent itself wrote (mail to
   oneself, as gc handoffs are): thrum never lets an author mark its own message.
5. The kinds never overlap: their prefixes (``gc_``, ``gcx_``, ``gcr_``, ``gck_``,
   none) differ.
"""

from __future__ import annotations

import re

from ..events.names import RESERVED_NAMES, is_name

PLAIN_PREFIX = "gc_"
HASHED_PREFIX = "gcx_"
AGENT_PREFIX = "gcr_"
CLERK_PREFIX = "gck_"
ROLE = "gc"  # the role of every agent that acts for a mailbox
MAX_NAME = 64
MAX_ADDRESS = 256  # what an agent's display field can hold
TAG_CHARS = 8

_SEP_RUN = {"-": "_", "/": "__", ".": "___", "_": "____"}
_RUN_SEP = {len(run): sep for sep, run in _SEP_RUN.items()}
_PLAIN_ADDRESS = re.compile(r"[a-z0-9]+(?:[-/._][a-z0-9]+)*")
_PLAIN_BODY = r"[a-z0-9]+(?:_{1,4}[a-z0-9]+)*"
_PLAIN_NAME = re.compile(r"gc_" + _PLAIN_BODY)
TAG_RE = re.compile(r"[a-z2-7]{8}")  # a replica tag (rule 4; made by thrum.gcmail.replica)
_AGENT_NAME = re.compile(r"gc[rk]_(" + TAG_RE.pattern + r")_(_{0,2})([a-z0-9_]+)")
_SEPARATOR = re.compile(r"[-/._]")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_DIGEST_CHARS = 16
_OURS = (PLAIN_PREFIX, HASHED_PREFIX, AGENT_PREFIX, CLERK_PREFIX)


class AddressError(ValueError):
    """An address that cannot name a mailbox (empty or too long)."""


def _digest(text: str, chars: int) -> str:
    import base64
    import hashlib

    raw = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return base64.b32encode(raw).decode("ascii")[:chars].lower()


def mailbox(address: str) -> str:
    """The mailbox (mention name) of a Gas City address.

    Raises:
        AddressError: the address is empty, only whitespace, or too long.
    """
    if not isinstance(address, str) or not address.strip():
        raise AddressError("the address is empty")
    if len(address) > MAX_ADDRESS:
        raise AddressError(f"the address is longer than {MAX_ADDRESS} characters")
    if address.startswith("@") and is_thrum_name(address[1:]):
        return address[1:]
    if _PLAIN_ADDRESS.fullmatch(address):
        name = PLAIN_PREFIX + _SEPARATOR.sub(lambda m: _SEP_RUN[m.group()], address)
        if len(name) <= MAX_NAME:
            return name
    room = MAX_NAME - len(HASHED_PREFIX) - 1 - _DIGEST_CHARS
    slug = _NOT_SLUG.sub("_", address.lower()).strip("_")[:room].rstrip("_")
    tail = _digest(address, _DIGEST_CHARS)
    return f"{HASHED_PREFIX}{slug}_{tail}" if slug else f"{HASHED_PREFIX}{tail}"


def agent(box: str, tag: str, *, clerk: bool = False) -> str:
    """The agent (or its clerk) that acts for mailbox ``box`` on the machine with replica tag ``tag``
    (rule 4; rule 3: the thrum agent itself)."""
    if not TAG_RE.fullmatch(tag):
        raise ValueError(f"bad replica tag {tag!r}")
    if not is_mailbox(box):
        return box
    prefix = CLERK_PREFIX if clerk else AGENT_PREFIX
    if box.startswith(PLAIN_PREFIX):
        name = f"{prefix}{tag}_{box[len(PLAIN_PREFIX) :]}"
    else:
        name = f"{prefix}{tag}__{box[len(HASHED_PREFIX) :]}"
    if len(name) <= MAX_NAME:
        return name
    return f"{prefix}{tag}___{_digest(box, 20)}"


def keeper_glob(box: str) -> str:
    """A GLOB pattern (SQLite's, and `fnmatch`'s) that matches exactly the rule-4 agents and
    clerks of mailbox ``box``, whatever their machine's tag; "" (matching no name) when
    ``box`` is not a Gas City mailbox. The mailbox's state is kept by these and by
    nobody who merely claims ``module = box`` (thrum.store.mailboxes)."""
    if not is_mailbox(box):
        return ""
    name = agent(box, "a" * TAG_CHARS)
    return "gc[rk]_" + "?" * TAG_CHARS + name[len(AGENT_PREFIX) + TAG_CHARS :]


def mailbox_of(name: str) -> str | None:
    """The mailbox a thrum name stands for, when the name alone says it.

    A mailbox is its own; a rule-4 agent names its mailbox unless it is a digest
    (None: ask its module); a thrum agent (rule 3) is its own mailbox.
    """
    m = _AGENT_NAME.fullmatch(name)
    if m:
        underscores, body = m.group(2), m.group(3)
        if underscores == "":
            return PLAIN_PREFIX + body
        if underscores == "_":
            return HASHED_PREFIX + body
        return None
    if name.startswith((AGENT_PREFIX, CLERK_PREFIX)):
        return None
    return name


def is_thrum_name(name: str) -> bool:
    """A name rule 3 passes through: valid, not reserved, and not one rules 1, 2 and 4 produce."""
    return is_name(name) and not name.startswith(_OURS) and name not in RESERVED_NAMES


def is_mailbox(name: str) -> bool:
    """A mailbox made by rule 1 or 2 (a Gas City address's, not a thrum agent's)."""
    return name.startswith((PLAIN_PREFIX, HASHED_PREFIX))


def is_gc_agent(name: str) -> bool:
    """An agent or clerk made by rule 4 (acts for a Gas City mailbox on one machine)."""
    return name.startswith((AGENT_PREFIX, CLERK_PREFIX))


def address_of(name: str, display: str | None = None) -> str:
    """The Gas City address of a mailbox or agent name.

    Plain mailboxes, and rule-4 agents of plain mailboxes, decode themselves; the
    others need ``display`` (the address their agents were registered with); a
    thrum agent is shown as ``@name``.
    """
    box = mailbox_of(name)
    if box is not None and _PLAIN_NAME.fullmatch(box):
        return re.sub(r"_{1,4}", lambda m: _RUN_SEP[len(m.group())], box[len(PLAIN_PREFIX) :])
    if display and _names_display(name, box, display):
        return display
    if box is not None and not box.startswith(_OURS):
        return "@" + box
    return name  # a mailbox whose address this machine does not know (yet)


def _names_display(name: str, box: str | None, display: str) -> bool:
    """Whether ``display`` is the address ``name`` stands for: the mailbox the name gives
    back, or for a digest name (no mailbox in it) the one whose agent would have this
    name. A display anyone may write is never taken on its word (issue 31)."""
    try:
        own = mailbox(display)
    except AddressError:
        return False
    if box is not None:
        return own == box
    m = _AGENT_NAME.fullmatch(name)
    return m is not None and is_mailbox(own) and agent(own, m.group(1), clerk=name.startswith(CLERK_PREFIX)) == name


def needs_display(name: str) -> bool:
    """Whether `address_of` needs the display to give the address back."""
    box = mailbox_of(name)
    return box is None or (box.startswith(_OURS) and not _PLAIN_NAME.fullmatch(box))
