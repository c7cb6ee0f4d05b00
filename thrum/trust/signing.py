"""Signatures over events, seals over batches of lines, and message ids bound to keys.

Rules:

1. The signed bytes of an event are its canonical form without ``sig``: the JSON
   object serialised compactly with sorted keys (orjson ``OPT_SORT_KEYS``). A
   signature covers what an event says, not how its line happens to be spelled.
2. ``sig`` is ``{"by": <signer>, "ed25519": <base64 of 64 bytes>}``.
3. A seal is a line of type ``seal`` by one signer listing the hashes of lines it
   vouches for (`line_hash`: the first 16 bytes of SHA-256 of the line without its
   newline, base64url without padding); one verification covers them all.
4. A message id ``msg_<ULID>`` is bound to its creator when the low 48 bits of the
   ULID are the creator's key tag; 32 more bits keep one creator's ids unique
   within a millisecond.

Pure apart from reading the clock and randomness for new ids.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import threading
import time
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ..events.ids import new_ulid, now_rfc3339, ulid_text
from .keys import TAG_BYTES, PublicKey
from .verdicts import digest

SEAL_TYPE = "seal"
MAX_SEAL_LINES = 100_000

__all__ = [
    "SEAL_TYPE",
    "canonical",
    "id_is_bound",
    "id_tag",
    "line_hash",
    "make_seal",
    "new_message_id",
    "sign",
    "signature_of",
    "signed",
    "verify",
]


def canonical(d: dict[str, Any]) -> bytes:
    """The bytes a signature covers. Raises TypeError/ValueError for values JSON cannot hold."""
    return orjson.dumps({k: v for k, v in d.items() if k != "sig"}, option=orjson.OPT_SORT_KEYS)


def sign(d: dict[str, Any], signer: str, private: Ed25519PrivateKey) -> dict[str, Any]:
    """``d`` with ``sig`` set (a new dict; ``d`` is not changed)."""
    return signed(d, signer, private)[0]


def signed(d: dict[str, Any], signer: str, private: Ed25519PrivateKey) -> tuple[dict[str, Any], bytes]:
    """`sign`, and the 64 bytes of the signature (a chain names the event by their hash)."""
    out = {k: v for k, v in d.items() if k != "sig"}
    signature = private.sign(canonical(out))
    out["sig"] = {"by": signer, "ed25519": base64.b64encode(signature).decode()}
    return out, signature


def signature_of(d: dict[str, Any]) -> tuple[str, bytes] | None:
    """(signer, signature bytes) from ``d["sig"]``, or None when absent or malformed."""
    sig = d.get("sig")
    if not isinstance(sig, dict):
        return None
    by, text = sig.get("by"), sig.get("ed25519")
    if not isinstance(by, str) or not isinstance(text, str) or len(text) != 88:
        return None
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)  # base64.b64decode(validate=True), without its wrapper
    except (binascii.Error, ValueError):
        return None
    return (by, raw) if len(raw) == 64 else None


def verify(d: dict[str, Any], key: PublicKey) -> bool:
    """True when ``d``'s signature verifies against ``key`` (the signer is not judged here)."""
    found = signature_of(d)
    if found is None:
        return False
    try:
        data = canonical(d)
    except (TypeError, ValueError):
        return False
    return key.verify(found[1], data)


def line_hash(line: bytes) -> str:
    """The name a seal gives a line (see rule 3): `verdicts.digest` in base64url."""
    return hash_text(digest(line))


def hash_text(raw: bytes) -> str:
    """``raw`` in base64url without padding (`base64.urlsafe_b64encode` without its two
    Python layers: a first rebuild names every line it does not remember this way)."""
    return binascii.b2a_base64(raw, newline=False).rstrip(b"=").translate(_URLSAFE).decode()


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def make_seal(signer: str, hashes: list[str], private: Ed25519PrivateKey) -> dict[str, Any]:
    """A signed seal vouching for the lines with these hashes."""
    seal: dict[str, Any] = {
        "type": SEAL_TYPE,
        "timestamp": now_rfc3339(),
        "event_id": new_ulid(),
        "v": 1,
        "agent_id": signer,
        "lines": list(hashes),
    }
    return sign(seal, signer, private)


def seal_hashes(d: dict[str, Any]) -> list[str] | None:
    """The hashes a seal lists, or None when the seal is malformed."""
    lines = d.get("lines")
    if not isinstance(lines, list) or len(lines) > MAX_SEAL_LINES:
        return None
    if not all(isinstance(h, str) and len(h) == 22 for h in lines):
        return None
    return lines


# ----------------------------------------------------------------------------- bound ids

_lock = threading.Lock()
_last: dict[bytes, tuple[int, int]] = {}
_LOW = (1 << (TAG_BYTES * 8)) - 1


def new_message_id(tag: bytes) -> str:
    """``msg_<ULID>`` whose low 48 bits are ``tag``; unique per tag within this process."""
    assert len(tag) == TAG_BYTES
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        last_ms, last_seq = _last.get(tag, (-1, 0))
        seq = (last_seq + 1) & 0xFFFFFFFF if now_ms <= last_ms else int.from_bytes(os.urandom(4), "big")
        now_ms = max(now_ms, last_ms)
        _last[tag] = (now_ms, seq)
    value = (now_ms << 80) | (seq << 48) | int.from_bytes(tag, "big")
    return "msg_" + ulid_text(value)


def id_is_bound(message_id: str, key: PublicKey) -> bool:
    """True when ``message_id`` carries ``key``'s tag (rule 4)."""
    return id_tag(message_id) == key.tag


def id_tag(message_id: str) -> bytes | None:
    """The key tag a message id ``msg_<ULID>`` carries (rule 4), or None when it is no such id.

    A first rebuild asks once per message, then compares the tag with each key of the
    signer (`id_is_bound` per key decoded the id again for each). Only the last ten
    base32 digits are decoded (the low 50 bits hold the tag), by `int` over the
    Crockford digits mapped to Python's base-32 ones: a loop over the digits in Python
    cost more than the rest of the check (2.6 µs against 1.5 µs a message).
    """
    if _MESSAGE_ID.fullmatch(message_id) is None:
        return None
    value = int(message_id[-10:].encode().translate(_TO_BASE32), 32)
    return (value & _LOW).to_bytes(TAG_BYTES, "big")


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_MESSAGE_ID = re.compile(r"msg_[0-9A-HJKMNP-TV-Z]{26}")  # Crockford's digits: no I, L, O, U
_TO_BASE32 = bytes.maketrans(_CROCKFORD.encode(), b"0123456789abcdefghijklmnopqrstuv")  # each digit's value kept


# ------------------------------------------------------------------ invites (docs/design/trust.md, "Admission")

INVITE_DOMAIN = b"thrum-invite\0"


def invite_message(name: str, key_b64: str) -> bytes:
    """What an invite key signs to admit ``name`` with the key ``key_b64``."""
    return INVITE_DOMAIN + name.encode() + b"\0" + key_b64.encode()


def invite_proof(name: str, key_b64: str, invite_private: Ed25519PrivateKey) -> dict[str, Any]:
    """The ``invite`` field of a registration redeeming an invite."""
    from .keys import public_b64

    sig = invite_private.sign(invite_message(name, key_b64))
    return {"key": public_b64(invite_private), "sig": base64.b64encode(sig).decode()}


def invite_proof_ok(name: str, key: PublicKey, invite: dict[str, Any]) -> bool:
    """Whether ``invite`` proves that the holder of its invite key admits ``name`` with ``key``."""
    from .keys import decode_public

    try:
        ikey = decode_public(invite.get("key"))
        sig = base64.b64decode(str(invite.get("sig")), validate=True)
    except (ValueError, binascii.Error):
        return False
    return len(sig) == 64 and ikey.verify(sig, invite_message(name, key.b64))
