"""The search query language: a query string parsed into terms and filters.

Pure (no I/O, no SQL): ``parse(text, now=...)`` returns a `Query` or raises
`ValidationError` (field ``query``) with one line naming the problem; nothing a
person or an agent types makes it fail any other way (a hypothesis test feeds it
arbitrary text). The store turns a `Query` into SQL (`thrum.store.search`).

The language (docs/design/rpc.md, ``message.search``):

- ``word`` — a term; every term must match (AND). A word with punctuation inside
  (``parse_config``, ``store/fold.py``, ``message.create``) matches those words in
  that order, so an identifier is found whole; each part is found alone too.
- ``"a phrase"`` — the words next to each other, in order.
- ``pref*``, ``"a phr"*`` — a word (the last word of a phrase) that starts so.
- ``-word``, ``-"a phrase"`` — messages without it.
- Filters, ``field:value`` (a value with spaces in quotes, ``from:"..."``):
  ``from:NAME`` (or ``from:me``) the author; ``to:NAME``/``to:@ROLE``/``to:@GROUP``
  (or ``to:me``) whom it reaches, as the inbox's mention filters resolve it;
  ``scope:TYPE:VALUE``, ``ref:TYPE:VALUE``; ``in:thr_…`` the thread (a message id:
  its thread); ``is:unread``, ``is:archived`` (only the caller's archived messages,
  as ``inbox --archived``); ``priority:low|normal|high|critical``;
  ``after:WHEN`` (at or after) and ``before:WHEN`` (strictly before), WHEN being a
  date (``2026-03-01``, midnight UTC), a time (``2026-03-01T14:00``, UTC unless
  it names its offset) or an age (``3d``, ``12h``, ``2w``: that long before now).
  Repeating ``from:``, ``in:`` or ``priority:`` accepts any of the values (a
  message has one of each); repeated ``to:``, ``scope:``, ``ref:`` must all hold.
- A query of filters only lists what they select, newest first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

from .errors import ValidationError

MAX_QUERY_CHARS = 1000
MAX_TERMS = 32
FIELDS = ("from", "to", "scope", "ref", "in", "is", "priority", "before", "after")
PRIORITIES = ("low", "normal", "high", "critical")  # events.values.PRIORITIES (kept in step by a test)
IS_VALUES = ("unread", "archived")
ME = "me"  # from:me, to:me: the caller (`Query.for_caller`)
_FIELD_RE = re.compile(r"([A-Za-z]+):")
_AGE_RE = re.compile(r"(\d{1,6})([hdw])")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_AGE_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
_ID_RE = re.compile(r"(thr|msg)_[0-9A-Za-z]{4,26}")


@dataclass(frozen=True)
class Term:
    """A word, a phrase or a prefix, wanted or (``negated``) excluded."""

    text: str
    phrase: bool = False
    prefix: bool = False
    negated: bool = False

    def fts(self) -> str:
        """The term as an FTS5 string: quoted, so no character of it is FTS5 syntax."""
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + " *" if self.prefix else quoted


@dataclass(frozen=True)
class Query:
    """A parsed query: terms, and filters the store turns into conditions."""

    terms: tuple[Term, ...] = ()
    authors: tuple[str, ...] = ()
    recipients: tuple[str, ...] = ()
    scopes: tuple[tuple[str, str], ...] = ()
    refs: tuple[tuple[str, str], ...] = ()
    threads: tuple[str, ...] = ()
    priorities: tuple[str, ...] = ()
    unread: bool = False
    archived: bool = False
    after: str | None = None  # a time key (events.time_key form): created at or after
    before: str | None = None  # created strictly before
    text: str = field(default="", compare=False)

    @property
    def wanted(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if not t.negated)

    @property
    def excluded(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if t.negated)

    @property
    def needs_caller(self) -> bool:
        """Whether the query says something about whoever asks (is:unread, is:archived, from:me, to:me)."""
        return self.unread or self.archived or ME in self.authors or ME in self.recipients

    def for_caller(self, caller: str) -> Query:
        """The query with ``me`` naming ``caller``."""

        def swap(names: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(caller if n == ME else n for n in names))

        return replace(self, authors=swap(self.authors), recipients=swap(self.recipients))

    def match_expression(self, lead: str | None = None) -> str | None:
        """The FTS5 MATCH expression: ``lead`` (an expression of the caller's, e.g. what a filter
        narrows to) and the wanted terms, minus the excluded ones; None when neither is given."""
        parts = ([f"({lead})"] if lead else []) + [t.fts() for t in self.wanted]
        if not parts:
            return None
        expr = " AND ".join(parts)
        for t in self.excluded:
            expr += " NOT " + t.fts()
        return expr

    def exclusion_expression(self) -> str | None:
        """Any excluded term, as one FTS5 expression (for a query without wanted terms)."""
        if not self.excluded:
            return None
        return " OR ".join(t.fts() for t in self.excluded)


def _fail(problem: str) -> ValidationError:
    return ValidationError(f"invalid query: {problem}", field="query")


def _show(text: str, limit: int = 40) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _searchable(text: str) -> bool:
    """Whether text holds something the index tokenises (a letter or a digit)."""
    return any(ch.isalnum() for ch in text)


# --------------------------------------------------------------------------- lexing


@dataclass
class _Token:
    text: str  # a bare word, a phrase's words, or a field's value
    quoted: bool
    prefix: bool
    negated: bool
    field: str | None
    at: int  # 1-based column, for messages
    typed: str  # as written, for messages


def _read_quoted(text: str, start: int) -> tuple[str, int]:
    """The text between the quote at ``start`` and the next one; the index after the closing quote."""
    end = text.find('"', start + 1)
    if end < 0:
        raise _fail(f'unbalanced quote: the " at character {start + 1} is never closed')
    return text[start + 1 : end], end + 1


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        at = i + 1
        negated = text[i] == "-"
        if negated:
            i += 1
            if i >= n or text[i].isspace():
                raise _fail(f"a lone '-' at character {at} excludes nothing: write -word or -\"a phrase\"")
        name = None
        m = _FIELD_RE.match(text, i)
        if m is not None:
            name = m.group(1).lower()
            if name not in FIELDS:
                raise _fail(
                    f"unknown field {m.group(1) + ':'!r} at character {i + 1} (fields: "
                    f"{', '.join(f + ':' for f in FIELDS)}); put text with a colon in quotes to search for it"
                )
            if negated:
                raise _fail(f"'-' excludes words and phrases, not filters ({text[i : m.end()]} at character {at})")
            i = m.end()
        if i < n and text[i] == '"':
            value, i = _read_quoted(text, i)
            quoted = True
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] != '"':
                i += 1
            value, quoted = text[start:i], False
        prefix = False
        if quoted and i < n and text[i] == "*":
            prefix, i = True, i + 1
        elif not quoted and value.endswith("*") and name is None:
            prefix, value = True, value[:-1]
        if name is not None and not value:
            raise _fail(f"{name}: at character {at} has no value")
        if name is None and prefix and not value:
            raise _fail(f"a lone '*' at character {at}: write pref* to find words that start with pref")
        if name is None and not quoted and "*" in value:
            raise _fail(f"'*' works only at the end of a word (a prefix search): {_show(value + '*' * prefix)}")
        out.append(_Token(value, quoted, prefix, negated, name, at, text[at - 1 : i]))
    return out


# --------------------------------------------------------------------------- values


def _when(name: str, value: str, now: datetime) -> str:
    """A before:/after: value as a time key (UTC, milliseconds, ``Z``)."""
    age = _AGE_RE.fullmatch(value)
    try:
        if age is not None:
            moment = now - int(age.group(1)) * _AGE_UNITS[age.group(2)]
        else:
            if _DATE_RE.fullmatch(value):
                moment = datetime.fromisoformat(value).replace(tzinfo=timezone.utc)
            elif len(value) > 10 and _DATE_RE.match(value) and value[10] in "Tt ":
                moment = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1] in "Zz" else value)
                if moment.tzinfo is None:
                    moment = moment.replace(tzinfo=timezone.utc)
            else:
                raise ValueError(value)
        moment = moment.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise _fail(
            f"{name}: takes a date (2026-03-01), a time (2026-03-01T14:00, UTC unless it says +02:00) "
            f"or an age (3d, 12h, 2w), not {_show(value)}"
        ) from None
    m = moment  # (not strftime: it writes years before 1000 with fewer digits)
    date = f"{m.year:04d}-{m.month:02d}-{m.day:02d}"
    return f"{date}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}.{m.microsecond // 1000:03d}Z"


def _tag(name: str, value: str) -> tuple[str, str]:
    kind, sep, rest = value.partition(":")
    if not sep or not kind or not rest:
        example = "module:auth" if name == "scope" else "issue:42"
        raise _fail(f"{name}: takes TYPE:VALUE (e.g. {name}:{example}), not {_show(value)}")
    return kind, rest


def _name(name: str, value: str) -> str:
    bare = value[1:] if value.startswith("@") else value
    if not bare or any(ch.isspace() for ch in bare):
        raise _fail(f"{name}: takes a name{' or @role' if name == 'to' else ''}, not {_show(value)}")
    return bare


# --------------------------------------------------------------------------- parsing


def parse(text: object, *, now: datetime) -> Query:
    """Parse a query string (``now``: the moment ages like ``3d`` count back from).

    ``from:me`` and ``to:me`` stay ``me`` until `Query.for_caller` names the caller.

    Raises:
        ValidationError: one line naming the problem (field ``query``).
    """
    if not isinstance(text, str):
        raise ValidationError("invalid params: query must be a string", field="query")
    if len(text) > MAX_QUERY_CHARS:
        raise _fail(f"it is {len(text):,} characters long; at most {MAX_QUERY_CHARS:,}")
    if "\x00" in text:
        raise _fail("it contains a NUL character")
    terms: list[Term] = []
    names: dict[str, list[str]] = {k: [] for k in ("from", "to", "in", "priority")}
    tags: dict[str, list[tuple[str, str]]] = {"scope": [], "ref": []}
    flags = {"unread": False, "archived": False}
    after: str | None = None
    before: str | None = None
    for tok in _tokens(text):
        if tok.field is None:
            if not _searchable(tok.text):
                raise _fail(f"{_show(tok.typed)} at character {tok.at} has no letters or digits to search for")
            terms.append(Term(tok.text, phrase=tok.quoted, prefix=tok.prefix, negated=tok.negated))
            if len(terms) > MAX_TERMS:
                raise _fail(f"more than {MAX_TERMS} words and phrases")
            continue
        name, value = tok.field, tok.text
        if name in ("from", "to"):
            names[name].append(_name(name, value))
        elif name in ("scope", "ref"):
            tags[name].append(_tag(name, value))
        elif name == "in":
            if _ID_RE.fullmatch(value) is None:
                raise _fail(f"in: takes a thread id (thr_…) or a message id (msg_…), not {_show(value)}")
            names["in"].append(value)
        elif name == "is":
            if value.lower() not in IS_VALUES:
                raise _fail(f"is: takes {' or '.join(IS_VALUES)}, not {_show(value)}")
            flags[value.lower()] = True
        elif name == "priority":
            if value.lower() not in PRIORITIES:
                raise _fail(f"priority: takes {', '.join(PRIORITIES)}, not {_show(value)}")
            names["priority"].append(value.lower())
        elif name == "after":
            key = _when(name, value, now)
            after = key if after is None else max(after, key)
        else:
            key = _when(name, value, now)
            before = key if before is None else min(before, key)
    selected = any(names.values()) or any(tags.values()) or any(flags.values())
    if not terms and not selected and after is None and before is None:
        raise _fail("it is empty: give words to look for, or filters like from:NAME")
    return Query(
        terms=tuple(terms),
        authors=tuple(dict.fromkeys(names["from"])),
        recipients=tuple(dict.fromkeys(names["to"])),
        scopes=tuple(dict.fromkeys(tags["scope"])),
        refs=tuple(dict.fromkeys(tags["ref"])),
        threads=tuple(dict.fromkeys(names["in"])),
        priorities=tuple(dict.fromkeys(names["priority"])),
        unread=flags["unread"],
        archived=flags["archived"],
        after=after,
        before=before,
        text=text,
    )
