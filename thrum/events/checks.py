"""What the event schema (`thrum.events.schema`) is built from: the patterns it matches after
decoding, and how a refused field is worded.

A field's wording is declared with its type, in the schema (``Meta(extra=words(...))``):
one template per way a value can be wrong (`KINDS`), or ``all`` for every way. Both
paths that refuse a value word it from there: the schema's own checks after decoding
(`fail`) and the general path, which turns msgspec's errors into the same one-line
messages (`thrum.events.validation`). A field without its own wording gets the generic
one (`GENERIC`): "is required", "must be a string", "is longer than 64 characters"...

Patterns are matched here rather than as msgspec ``pattern`` constraints: msgspec calls
Python's regex once per field (~0.35 µs), and a message has eight. Values that repeat line
after line (agents, sessions, threads, tag types) are remembered once they matched
(`Known`).
"""

from __future__ import annotations

import re
import types
import typing
from calendar import isleap
from collections import abc
from functools import cache
from typing import Any, Literal, NoReturn, Union

from msgspec import Meta, Struct

from .ids import MAX_YEAR, MIN_YEAR

# The ways a value can be wrong, as the wording names them.
KINDS = ("missing", "type", "empty", "long", "many", "entry", "unknown", "invalid", "reserved")

GENERIC = {
    "missing": "is required",
    "type": "must be a string",
    "empty": "must not be empty",
    "long": "is longer than {n} characters",
    "many": "has more than {n} entries",
    "entry": "has an invalid entry {v80}",
    "unknown": "has an unknown field {value!r}",
    "invalid": "invalid value {v80}",
    "reserved": "{value!r} is reserved",
}
CHOICE = "must be one of {choices} (got {v40})"


def words(**by_kind: str) -> dict[str, Any]:
    """A field's wording, for ``Meta(extra=...)``: templates by kind (`KINDS`, or ``all``), and
    ``name``, the field's name in messages when it is not its own (``format`` for a body's).

    Templates may use ``{value}``, ``{v40}``/``{v80}`` (its text cut to 40/80 characters,
    quoted), ``{n}`` (a limit), ``{choices}``, ``{parent[key]}`` (the object holding the
    field) and ``{event[key]}`` (the event's field, or its default).
    """
    assert set(by_kind) <= {*KINDS, "all", "name"}, by_kind
    return {"words": by_kind}


# --------------------------------------------------------------------------- patterns

TIMESTAMP = (  # RFC 3339 UTC, 2000-2099 (`ids.is_valid_timestamp`), its parts' ranges spelled out
    r"20[0-9]{2}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
    r"(?:\.[0-9]{1,9})?Z"
)
assert (MIN_YEAR, MAX_YEAR) == (2000, 2099)  # what the pattern's "20[0-9]{2}" says
TIMESTAMP_RE = re.compile(TIMESTAMP)

# A chain link names its predecessor by the first 16 bytes of SHA-256 of its signature,
# base64url without padding (`thrum.trust.chains.sig_hash`); a log id is what the trust
# root says (letters, digits, ``_``, ``-``, ``.``, ``:``).
CHAIN_HASH_RE = re.compile(r"[A-Za-z0-9_-]{22}")
LOG_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
MAX_CHAIN_SEQ = (1 << 53) - 1  # what every JSON reader keeps exact

_THIRTY_DAYS = frozenset({"04", "06", "09", "11"})


def real_day(ts: str) -> bool:
    """Whether the date of a timestamp that matched `TIMESTAMP` exists (days past the 28th)."""
    day = ts[8:10]
    if day <= "28":
        return True
    month = ts[5:7]
    if month == "02":
        return day == "29" and isleap(int(ts[0:4]))
    return day <= ("30" if month in _THIRTY_DAYS else "31")


def is_timestamp(value: object) -> bool:
    return type(value) is str and TIMESTAMP_RE.fullmatch(value) is not None and real_day(value)


class Known:
    """A pattern, names it refuses, and the values already seen to match (at most `LIMIT`):
    names and ids that repeat on every line are matched once."""

    LIMIT = 4096

    def __init__(self, pattern: re.Pattern[str], refused: frozenset[str] = frozenset()):
        self.match = pattern.fullmatch
        self.refused = refused
        self.seen: set[str] = set()

    def __call__(self, value: str) -> bool:
        if value in self.seen:
            return True
        if type(value) is not str or self.match(value) is None or value in self.refused:
            return False
        if len(self.seen) < self.LIMIT:
            self.seen.add(value)
        return True


# --------------------------------------------------------------------------- wording


class Field:
    """What the wording needs to know of one declared field."""

    __slots__ = ("choices", "default", "name", "nested", "words")

    def __init__(self, name: str, words: dict[str, str], choices: tuple[str, ...], nested: Any, default: Any):
        self.name = name
        self.words = words
        self.choices = choices
        self.nested = nested  # the Struct a value of this field (or each of its entries) is
        self.default = default

    def template(self, kind: str) -> str:
        w = self.words
        if kind in w:
            return w[kind]
        if "all" in w:
            return w["all"]
        if self.choices:
            return CHOICE
        return GENERIC[kind]


@cache
def fields_of(cls: type[Struct]) -> dict[str, Field]:
    """The declared fields of a Struct, with their wording (read from the annotations once)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    names = cls.__struct_fields__
    defaults = dict(zip(names[len(names) - len(cls.__struct_defaults__) :], cls.__struct_defaults__))
    out = {}
    for name in cls.__struct_fields__:
        said: dict[str, str] = {}
        choices: list[str] = []
        nested: list[Any] = []
        _walk(hints[name], said, choices, nested)
        default = defaults.get(name)
        choice = tuple(c for c in choices if c)
        out[name] = Field(said.pop("name", name), said, choice, nested[0] if nested else None, default)
    return out


def _walk(tp: Any, said: dict[str, str], choices: list[str], nested: list[Any]) -> None:
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(tp)
        for m in metadata:
            if isinstance(m, Meta) and m.extra:
                said.update(m.extra.get("words", {}))
        _walk(base, said, choices, nested)
    elif origin is Union or origin is types.UnionType or origin in (tuple, list, abc.Sequence):
        for arg in typing.get_args(tp):
            if arg is not Ellipsis:
                _walk(arg, said, choices, nested)
    elif origin is Literal:
        choices.extend(a for a in typing.get_args(tp) if isinstance(a, str))
    elif isinstance(tp, type) and issubclass(tp, Struct):
        nested.append(tp)  # (its fields have their own wording)


class _Forgiving(dict[str, Any]):
    """``{parent[key]}`` in a template: None for a key the object does not have."""

    def __missing__(self, key: str) -> Any:
        return None


class _Lenient(dict[str, Any]):
    """``{event[key]}`` in a template: the event's value, or the field's default when it has none."""

    def __init__(self, raw: dict[str, Any], declared: dict[str, Field]):
        super().__init__(raw)
        self.declared = declared

    def __missing__(self, key: str) -> Any:
        f = self.declared.get(key)
        return f.default if f is not None else None

    def __getitem__(self, key: str) -> Any:
        value = dict.get(self, key)
        return value if value else self.__missing__(key)


def say(
    field: Field,
    kind: str,
    value: Any,
    *,
    name: str | None = None,
    n: str = "",
    parent: Any = None,
    event: dict[str, Any] | None = None,
    declared: dict[str, Field] | None = None,
) -> str:
    """One line: the field's name and what is wrong with its value."""
    text = str(value)
    words = field.template(kind).format(
        value=value,
        v40=repr(text[:40]),
        v80=repr(text[:80]),
        n=n,
        choices=", ".join(field.choices),
        parent=_Forgiving(parent if isinstance(parent, dict) else {}),
        event=_Lenient(event or {}, declared or {}),
    )
    return f"{name or field.name}: {words}"


def fail(owner: Struct, name: str, value: Any, kind: str = "invalid") -> NoReturn:
    """Refuse ``owner``'s field ``name`` in its declared words (from a check after decoding)."""
    declared = fields_of(type(owner))
    event = {f: getattr(owner, f) for f in declared}
    raise ValueError(say(declared[name], kind, value, event=event, declared=declared))


def pattern(owner: Struct, name: str, value: str, match: Known | Any) -> None:
    """Refuse ``value`` unless it matches (a `Known` also refuses its reserved names)."""
    if not match(value):
        refused = isinstance(match, Known) and value in match.refused
        fail(owner, name, value, "reserved" if refused else "invalid")
