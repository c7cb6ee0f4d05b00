"""What the search index holds beside a message's own text: its tag values and the parts of its CamelCase words.

Pure (no SQL): the fold calls these when it writes a message row (create, edit)
and stores the results in ``messages.search_tags`` and ``messages.search_parts``,
which the index reads like the body (`thrum.store.search_index`).

Why the parts: the index's tokenizer (``unicode61``, docs/design/decisions.md
"Search") splits ``snake_case``, ``dotted.names`` and ``paths/to/file.py`` at
their punctuation, so their parts are words of their own and the whole is found
as those words in a row. It cannot split ``CamelCase`` (one run of letters), so
``FoldResult`` would only be found whole; its parts (``Fold Result``) are indexed
here, in a column of their own, so ``result`` finds it too.
"""

from __future__ import annotations

import re

MAX_PARTS = 200  # parts indexed per message: a pasted blob of random case cannot bloat the index
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_HUMP = re.compile(r"[a-z0-9][A-Z]|[A-Z][A-Z][a-z]")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
SKIPPED_REF_TYPES = frozenset({"reply_to"})  # message ids: no word anyone searches for


def camel_parts(text: str) -> str:
    """The parts of each CamelCase word of ``text`` (``parseHTTPRequest`` → ``parse HTTP Request``), space-separated.

    Only words with a hump (lower→upper, or an upper run before a capitalised
    word) and parts of two letters or more (so ``aGVsbG8`` and other encoded blobs
    add nothing); a word seen before is not repeated. Written for the fold, which
    calls it for every message: plain words are passed over with ``str`` methods
    (a regular expression over every character cost 2.5 µs a message).
    """
    if text.islower() or text.isupper():
        return ""
    out: list[str] = []
    chunks: set[str] = set()
    seen: set[str] = set()
    for chunk in text.split():
        if chunk.islower() or chunk.isupper() or chunk.istitle() or chunk in chunks:
            continue
        chunks.add(chunk)
        for word in _WORD.findall(chunk):
            if word in seen or _HUMP.search(word) is None:
                continue
            seen.add(word)
            parts = _PART.findall(word)
            if len(parts) < 2 or any(len(p) < 2 and not p.isdigit() for p in parts):
                continue
            out.extend(parts)
            if len(out) >= MAX_PARTS:
                return " ".join(out[:MAX_PARTS])
    return " ".join(out)


def tag_text(values: list[str]) -> str:
    """A message's scope and ref values (the fold leaves out refs of `SKIPPED_REF_TYPES`), space-separated,
    once each, without a leading ``@``."""
    if len(values) == 1:  # the usual case (one mention), without the set below
        v = values[0]
        return v[1:] if v[:1] == "@" else v
    return " ".join(dict.fromkeys(v[1:] if v[:1] == "@" else v for v in values))
