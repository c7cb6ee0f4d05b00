"""Editing JSON and JSONC files in place: change one member, keep every other byte.

Hosts keep settings in JSON files their users also edit by hand, some with
comments and trailing commas (Gemini CLI strips comments, opencode reads JSONC,
VS Code-style editors write them). `thrum setup` must change only its own entries,
so this module parses the text into nodes that remember where they are (`parse`),
and each edit (`set_member`, `remove_member`, `append_item`, `replace_item`,
`remove_item`) rewrites only the span it touches, in the indentation the file
already uses. Everything else, comments included, stays byte for byte.

Pure: text in, text out. Errors say the line and column (`JsoncError`).
"""

from __future__ import annotations

import json
import re
from typing import Any


class JsoncError(ValueError):
    """The text is not JSON (with comments and trailing commas allowed)."""


class Node:
    """A value and its span ``text[start:end]``. Objects have ``members`` ((key, key
    start, value node) in order), arrays ``items``; leaves have ``value``."""

    __slots__ = ("kind", "start", "end", "value", "members", "items")

    def __init__(self, kind: str, start: int):
        self.kind = kind
        self.start = start
        self.end = start
        self.value: Any = None
        self.members: list[tuple[str, int, Node]] = []
        self.items: list[Node] = []

    def member(self, key: str) -> Node | None:
        found = None
        for k, _, node in self.members:
            if k == key:
                found = node  # the last one wins, as JSON.parse has it
        return found

    def python(self) -> Any:
        if self.kind == "object":
            return {k: n.python() for k, _, n in self.members}
        if self.kind == "array":
            return [n.python() for n in self.items]
        return self.value


_WS = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> JsoncError:
        line = self.text.count("\n", 0, self.pos) + 1
        col = self.pos - (self.text.rfind("\n", 0, self.pos) + 1) + 1
        return JsoncError(f"line {line}, column {col}: {what}")

    def skip(self) -> None:
        m = _WS.match(self.text, self.pos)
        self.pos = m.end() if m else self.pos
        if self.text.startswith("/*", self.pos):
            raise self.fail("unterminated comment")

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        t, i = self.text, self.pos
        if i >= len(t):
            raise self.fail("unexpected end of text")
        c = t[i]
        if c == "{":
            return self.container("object", "}", depth)
        if c == "[":
            return self.container("array", "]", depth)
        node = Node("leaf", i)
        if c == '"':
            m = _STRING.match(t, i)
            if not m:
                raise self.fail("bad string")
            node.value = json.loads(m.group())
        elif t.startswith(("true", "false", "null"), i):
            word = next(w for w in ("true", "false", "null") if t.startswith(w, i))
            node.value = {"true": True, "false": False, "null": None}[word]
            m = re.compile(word).match(t, i)
        else:
            m = _NUMBER.match(t, i)
            if not m:
                raise self.fail(f"unexpected {c!r}")
            node.value = json.loads(m.group())
        assert m is not None
        node.end = self.pos = m.end()
        return node

    def container(self, kind: str, close: str, depth: int) -> Node:
        node = Node(kind, self.pos)
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith(close, self.pos):
                break
            if kind == "object":
                key_at = self.pos
                m = _STRING.match(self.text, self.pos)
                if not m:
                    raise self.fail("expected a quoted key")
                self.pos = m.end()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                node.members.append((json.loads(m.group()), key_at, self.value(depth + 1)))
            else:
                node.items.append(self.value(depth + 1))
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            self.skip()
            if not self.text.startswith(close, self.pos):
                raise self.fail(f"expected ',' or '{close}'")
            break
        self.pos += 1
        node.end = self.pos
        return node


def parse(text: str) -> Node:
    """The root node of ``text`` (an empty text is an empty object).

    Raises:
        JsoncError: not JSON(C); the message names the line and column.
    """
    if not text.strip():
        return parse("{}")
    p = _Parser(text)
    root = p.value()
    p.skip()
    if p.pos != len(text):
        raise p.fail("unexpected text after the value")
    return root


# --------------------------------------------------------------------------- layout


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _indent_at(text: str, pos: int) -> str:
    start = _line_start(text, pos)
    m = re.match(r"[ \t]*", text[start:pos])
    return m.group() if m else ""


def indent_unit(text: str) -> str:
    """The file's indentation step (its first indented line's), two spaces by default."""
    m = re.search(r"\n([ \t]+)\S", text)
    return m.group(1) if m else "  "


def dump(value: Any, indent: str, unit: str, *, compact: bool = False) -> str:
    """``value`` as JSON laid out like the file: nested lines at ``indent`` + ``unit`` steps
    (``compact``: on one line, for a container the file keeps on one line)."""
    if compact:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _piece(key: str | None, value: Any, indent: str, unit: str, compact: bool) -> str:
    body = dump(value, indent, unit, compact=compact)
    return body if key is None else json.dumps(key, ensure_ascii=False) + ": " + body


def _after_comma(text: str, pos: int) -> int | None:
    """Where a comma right after ``pos`` (past whitespace and comments) ends, else None."""
    m = _WS.match(text, pos)
    j = m.end() if m else pos
    return j + 1 if text.startswith(",", j) else None


def _entries(parent: Node) -> tuple[list[int], list[int]]:
    """Where each entry of ``parent`` starts (a member: at its key) and ends."""
    if parent.kind == "object":
        return [k for _, k, _ in parent.members], [n.end for _, _, n in parent.members]
    return [n.start for n in parent.items], [n.end for n in parent.items]


def _insert(text: str, parent: Node, key: str | None, value: Any) -> str:
    """``key: value`` (an object) or ``value`` (an array) added as the last entry of ``parent``."""
    unit = indent_unit(text)
    starts, ends = _entries(parent)
    if starts:
        same_line = "\n" not in text[parent.start : ends[-1]]
        piece = _piece(key, value, _indent_at(text, starts[-1]), unit, same_line)
        comma = _after_comma(text, ends[-1])
        at = comma if comma is not None else ends[-1]
        lead = " " if same_line else "\n" + _indent_at(text, starts[-1])
        if comma is not None:  # the file ends its entries with a comma: so does the new one
            return text[:at] + lead + piece + "," + text[at:]
        return text[:at] + "," + lead + piece + text[at:]
    outer = _indent_at(text, parent.start)
    piece = _piece(key, value, outer + unit, unit, False)
    close = parent.end - 1
    inside = text[parent.start + 1 : close].rstrip(" \t")
    if not inside.strip():
        inside = ""
    return text[: parent.start + 1] + inside + "\n" + outer + unit + piece + "\n" + outer + text[close:]


def _remove(text: str, parent: Node, index: int) -> str:
    """Entry ``index`` of ``parent`` cut out with its separator; the rest untouched."""
    starts, ends = _entries(parent)
    start, end = starts[index], ends[index]
    if len(starts) == 1:
        comma = _after_comma(text, end)
        cut_end = comma if comma is not None else end
        if not (text[parent.start + 1 : start] + text[cut_end : parent.end - 1]).strip():
            return text[: parent.start + 1] + text[parent.end - 1 :]
        line = _line_start(text, start)
        cut_start = line if not text[line:start].strip() else start
        return text[:cut_start] + _trim_line(text, cut_end)
    if index + 1 < len(starts):
        nxt = starts[index + 1]
        line, nline = _line_start(text, start), _line_start(text, nxt)
        if line != nline and not text[line:start].strip() and not text[nline:nxt].strip():
            return text[:line] + text[nline:]
        return text[:start] + text[nxt:]
    own = _after_comma(text, end)
    if own is not None:  # a trailing comma: keep the previous entry's, drop this one's
        return text[: _after_comma(text, ends[index - 1])] + text[own:]
    return text[: ends[index - 1]] + text[end:]


def _trim_line(text: str, pos: int) -> str:
    """``text[pos:]`` without the rest of its line when that rest is blank."""
    nl = text.find("\n", pos)
    if nl != -1 and not text[pos:nl].strip():
        return text[nl + 1 :]
    return text[pos:]


# --------------------------------------------------------------------------- edits


def _walk(root: Node, path: list[Any]) -> Node | None:
    """The node at ``path``: object keys, and array indexes (ints)."""
    node: Node | None = root
    for key in path:
        if node is None:
            return None
        if isinstance(key, int):
            node = node.items[key] if node.kind == "array" and 0 <= key < len(node.items) else None
        elif node.kind == "object":
            node = node.member(key)
        else:
            return None
    return node


def set_member(text: str, path: list[str], value: Any) -> str:
    """``text`` with the member at ``path`` (object keys) set to ``value``, creating
    the objects on the way. An equal value leaves the text as it is.

    Raises:
        JsoncError: the text does not parse, or something on the path is not an object.
    """
    root = parse(text) if text.strip() else None
    if root is None:
        nested: Any = value
        for key in reversed(path):
            nested = {key: nested}
        return json.dumps(nested, indent=2, ensure_ascii=False) + "\n"
    node, depth = root, 0
    while depth < len(path) - 1:
        child = node.member(path[depth]) if node.kind == "object" else None
        if child is None:
            break
        node, depth = child, depth + 1
    if node.kind != "object":
        raise JsoncError(f"{'.'.join(path[:depth]) or 'the file'} is not an object")
    key = path[depth]
    existing = node.member(key)
    if existing is not None and depth == len(path) - 1:
        if existing.python() == value:
            return text
        key_at = next(k for _, k, n in node.members if n is existing)
        return text[: existing.start] + dump(value, _indent_at(text, key_at), indent_unit(text)) + text[existing.end :]
    if existing is not None:
        raise JsoncError(f"{'.'.join(path[: depth + 1])} is not an object")
    rest: Any = value
    for k in reversed(path[depth + 1 :]):
        rest = {k: rest}
    return _insert(text, node, key, rest)


def remove_member(text: str, path: list[str]) -> str:
    """``text`` without the member at ``path`` (unchanged when there is none)."""
    root = parse(text)
    parent = _walk(root, path[:-1])
    if parent is None or parent.kind != "object":
        return text
    indexes = [i for i, (k, _, _) in enumerate(parent.members) if k == path[-1]]
    for i in reversed(indexes):
        text = _remove(text, _walk(parse(text), path[:-1]), i)  # type: ignore[arg-type]
    return text


def get(text: str, path: list[Any]) -> Any:
    """The value at ``path``, or None."""
    node = _walk(parse(text), path)
    return node.python() if node is not None else None


def append_item(text: str, path: list[Any], value: Any) -> str:
    """``value`` appended to the array at ``path`` (created when missing)."""
    node = _walk(parse(text), path)
    if node is None:
        return set_member(text, path, [value])
    if node.kind != "array":
        raise JsoncError(f"{'.'.join(map(str, path))} is not an array")
    return _insert(text, node, None, value)


def replace_item(text: str, path: list[Any], index: int, value: Any) -> str:
    node = _walk(parse(text), path)
    if node is None or node.kind != "array":
        raise JsoncError(f"{'.'.join(map(str, path))} is not an array")
    item = node.items[index]
    if item.python() == value:
        return text
    return text[: item.start] + dump(value, _indent_at(text, item.start), indent_unit(text)) + text[item.end :]


def remove_item(text: str, path: list[Any], index: int) -> str:
    node = _walk(parse(text), path)
    if node is None or node.kind != "array":
        raise JsoncError(f"{'.'.join(map(str, path))} is not an array")
    return _remove(text, node, index)
