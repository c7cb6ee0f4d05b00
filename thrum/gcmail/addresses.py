"""Gas City addresses ⇄ thrum agent names (pure).

Gas City addresses are arbitrary strings (``human``, ``mayor``, ``myrig/witness``,
``gc-42``); thrum agent names are ``[a-z0-9_]{1,64}``. Each address owns exactly one
mailbox agent, so the mapping must be deterministic (every machine and process
computes the same name, with no shared table) and injective (two addresses never
share a mailbox).

Rules:

1. Plain addresses, runs of ``[a-z0-9]`` joined by single ``-``, ``/``, ``.`` or
   ``_``, map to ``gc_`` + the address with each separator written as a run of
   1, 2, 3 or 4 underscores: ``myrig/witness`` → ``gc_myrig__witness``,
   ``gc-42`` → ``gc_gc_42``. Separators are never adjacent in a plain address, so
   the run lengths decode unambiguously: the name alone gives the address back.
2. Every other address (capitals, other characters, doubled or edge separators,
   too long for 64 characters) maps to ``gcx_`` + a readable slug + ``_`` + 16
   base32 characters of its SHA-256 (80 bits: a collision needs ~2^40 addresses).
   The name does not give the address back; the agent's ``display`` field keeps
   it (every mailbox agent is registered with its address as display).
3. ``@name``, where ``name`` is a thrum agent, role or group name (not reserved)
   not spelt like rule 1 or 2 produces, is that thrum name itself: Gas City agents can write to thrum
   agents, and mail from a thrum agent ``alice`` shows as from ``@alice``.
4. The three kinds never overlap: rule 1 names start with ``gc_``, rule 2 names with
   ``gcx_``, rule 3 names with neither.
"""

from __future__ import annotations

import re

PLAIN_PREFIX = "gc_"
HASHED_PREFIX = "gcx_"
ROLE = "gc"                 # the role every mailbox agent is registered with
MAX_NAME = 64
MAX_ADDRESS = 256           # what an agent's display field can hold

_SEP_RUN = {"-": "_", "/": "__", ".": "___", "_": "____"}
_RUN_SEP = {len(run): sep for sep, run in _SEP_RUN.items()}
_PLAIN_ADDRESS = re.compile(r"[a-z0-9]+(?:[-/._][a-z0-9]+)*")
_PLAIN_NAME = re.compile(r"gc_[a-z0-9]+(?:_{1,4}[a-z0-9]+)*")
_NAME = re.compile(r"[a-z0-9_]{1,64}")
_SEPARATOR = re.compile(r"[-/._]")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_DIGEST_CHARS = 16
_RESERVED = frozenset({"daemon", "system", "thrum", "all", "broadcast"})  # thrum.events.names.RESERVED_NAMES


class AddressError(ValueError):
    """An address that cannot name a mailbox (empty or too long)."""


def to_name(address: str) -> str:
    """The thrum agent name of a Gas City address.

    Raises:
        AddressError: the address is empty, too long, or only whitespace.
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
    return _hashed(address)


def _hashed(address: str) -> str:
    import base64
    import hashlib

    digest = base64.b32encode(hashlib.sha256(address.encode("utf-8", "surrogatepass")).digest())
    tail = digest.decode("ascii")[:_DIGEST_CHARS].lower()
    room = MAX_NAME - len(HASHED_PREFIX) - 1 - _DIGEST_CHARS
    slug = _NOT_SLUG.sub("_", address.lower()).strip("_")[:room].rstrip("_")
    return f"{HASHED_PREFIX}{slug}_{tail}" if slug else f"{HASHED_PREFIX}{tail}"


def is_thrum_name(name: str) -> bool:
    """A name that rule 3 passes through: valid, and not one that rules 1 and 2 produce."""
    return (bool(_NAME.fullmatch(name)) and not name.startswith((PLAIN_PREFIX, HASHED_PREFIX))
            and name not in _RESERVED)


def is_mailbox(name: str) -> bool:
    """A name made by rule 1 or 2 (a Gas City mailbox, registered on first use)."""
    return name.startswith((PLAIN_PREFIX, HASHED_PREFIX))


def from_name(name: str, display: str | None = None) -> str:
    """The Gas City address of a thrum agent name.

    Rule 1 names decode themselves; rule 2 names need the agent's ``display``
    (their address); other names are thrum agents, shown as ``@name``.
    """
    if _PLAIN_NAME.fullmatch(name):
        body = name[len(PLAIN_PREFIX):]
        return re.sub(r"_{1,4}", lambda m: _RUN_SEP[len(m.group())], body)
    if name.startswith(HASHED_PREFIX) and display and to_name(display) == name:
        return display
    if name.startswith(HASHED_PREFIX) or name.startswith(PLAIN_PREFIX):
        return name  # a mailbox whose address this machine does not know (yet)
    return "@" + name


def needs_display(name: str) -> bool:
    """Whether `from_name` needs the agent's display to give the address back."""
    return name.startswith(HASHED_PREFIX) or (name.startswith(PLAIN_PREFIX) and not _PLAIN_NAME.fullmatch(name))
