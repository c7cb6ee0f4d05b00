"""Which copy of a line to keep when the remote and a replica disagree about its bytes.

The merge keys a line by ``(event_id, signer)``. Two different byte strings under
one key mean someone rewrote a line (docs/design/trust.md): the replica keeps the
copy that verifies against the key it trusts for the signer — its own when both
do (and the conflict is reported) — and the remote's otherwise, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .. import safejson
from .keys import PublicKey, decode_public
from .ring import KeyRing
from .signing import signature_of, verify

log = logging.getLogger(__name__)

__all__ = ["prefer_verified"]


def prefer_verified(ring: KeyRing, on_conflict: Callable[[str], None] | None = None) -> Callable[[bytes, bytes], bytes]:
    """A ``prefer(remote_line, local_line)`` for the merge, judging both against ``ring``."""

    def prefer(remote_line: bytes, local_line: bytes) -> bytes:
        remote_ok = _verifies(ring, remote_line)
        local_ok = _verifies(ring, local_line)
        if local_ok and not remote_ok:
            log.warning("the remote holds a rewritten copy of a line; keeping ours (which verifies)")
            return local_line
        if local_ok and remote_ok:
            if on_conflict is not None:
                on_conflict("both copies of a line verify but differ; keeping ours")
            return local_line
        return remote_line

    return prefer


def _verifies(ring: KeyRing, line: bytes) -> bool:
    try:
        d = safejson.loads(line)
    except ValueError:
        return False
    if not isinstance(d, dict):
        return False
    found = signature_of(d)
    if found is None:
        return False
    key: PublicKey | None = ring.key(found[0])
    if key is None and d.get("type") == "agent.register":
        try:
            key = decode_public(d.get("public_key"))  # self-signed: judged by the key it carries
        except ValueError:
            return False
    return key is not None and verify(d, key)
