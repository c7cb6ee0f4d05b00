"""Agent names: the one rule for what an agent (or role, or group) may be called.

Names match ``[a-z0-9_]{1,64}`` and agent names are not reserved. They name log
directories (``messages/{agent}/``) and identity files, so the pattern is also what
keeps paths safe. Used by the event normalisers, the daemon's parameter checks and
`thrum.identity`; importing it costs nothing but `re` (it is on the CLI's start-up path).
"""

from __future__ import annotations

import re

from ..errors import ValidationError

NAME_RE = re.compile(r"[a-z0-9_]{1,64}")
RESERVED_NAMES = frozenset({"daemon", "system", "thrum", "all", "broadcast"})
EVERYONE = "everyone"  # the built-in group of all agents: an address no agent or role may take
UNUSABLE_NAMES = RESERVED_NAMES | {EVERYONE}  # never an agent's name or role, from any source


def is_name(value: object) -> bool:
    """True for a string that matches the name pattern (reserved names included)."""
    return isinstance(value, str) and NAME_RE.fullmatch(value) is not None


def check_name(name: object, field: str = "name", *, what: str = "agent name") -> str:
    """Return ``name`` if it is a valid, unreserved agent name.

    Raises:
        ValidationError: it is not a string, has other characters, is too long, or is reserved.
    """
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ValidationError(
            f"invalid {what} {str(name)[:80]!r}: use lowercase letters, digits and _ (at most 64)", field=field
        )
    if name in RESERVED_NAMES:
        raise ValidationError(
            f"{name!r} is a reserved name ({', '.join(sorted(RESERVED_NAMES))}); choose another", field=field
        )
    return name
