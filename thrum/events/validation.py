"""The general path: an event given as a dict, validated by the schema (`thrum.events.schema`).

Every event is validated when it is built *and* when it is read back: the log is
untrusted input (anyone who can push to the remote can write a line). `normalise`
returns the event with known fields only and defaults filled, or raises
`ValidationError` naming the first bad field in one line. Unknown types and future
versions pass the envelope's checks and come back unchanged (they are kept, never
dropped).

Nothing here declares a field: the event's Struct is converted from the dict by msgspec
(the same rules as `schema.decode` applies to a line), after the leniencies the Structs
declare (`FALSY_IS_DEFAULT`), and msgspec's refusals are worded from the fields'
declarations (`thrum.events.checks`). This is the path of the write path (the typed
events, `thrum.events.typed`) and of the lines the fast path does not take.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, NoReturn

import msgspec

from ..errors import ValidationError
from .checks import fields_of, is_timestamp, say
from .ids import ULID_RE
from .schema import EVENT_TYPES, SCHEMAS, Envelope
from .values import EVENT_VERSION

__all__ = ["EVENT_TYPES", "SCHEMAS", "is_known", "normalise", "struct_of"]

Raw = dict[str, Any]  # an event as JSON gives it: validated here, never trusted before

_ENVELOPE = fields_of(Envelope)
_ULID = ULID_RE.fullmatch
_to_builtins = msgspec.to_builtins


def normalise(d: Any) -> Raw:
    """Validate a raw event dict; return it normalised (known fields only, defaults filled).

    Unknown types or future versions come back unchanged apart from the envelope's
    checks (callers keep the original line bytes).

    Raises:
        ValidationError: the dict is not a valid event.
    """
    event = struct_of(d)
    if event is None:
        return d  # type: ignore[no-any-return]  # preserved as-is
    out: Raw = _to_builtins(event)
    return out


def struct_of(d: Any) -> Envelope | None:
    """The event's Struct, every rule checked; None for a type or version this build keeps
    as written (after the envelope's checks).

    Raises:
        ValidationError: the dict is not a valid event.
    """
    if not isinstance(d, dict):
        raise ValidationError("event must be a JSON object", field="event")
    etype = d.get("type")
    if not isinstance(etype, str) or not etype:
        raise ValidationError("type: is required", field="type")
    event_id, ts, v = d.get("event_id"), d.get("timestamp"), d.get("v", EVENT_VERSION)
    if type(event_id) is not str or not _ULID(event_id):
        _refuse("event_id", event_id)
    if not is_timestamp(ts):
        _refuse("timestamp", ts)
    if type(v) is not int or v < 1:
        _refuse("v", v)
    cls = SCHEMAS.get(etype)
    if cls is None or v > EVENT_VERSION:
        return None
    try:
        return msgspec.convert(d, cls)
    except msgspec.ValidationError as exc:
        lenient = _lenient(cls, d)  # (a falsy value the type takes as it is reads the same either way)
        if lenient is d:
            raise explain(cls, exc, d) from None
    try:
        return msgspec.convert(lenient, cls)
    except msgspec.ValidationError as exc:
        raise explain(cls, exc, d) from None


def is_known(d: Raw) -> bool:
    """True for a type and version this build validates (and folds)."""
    return d.get("type") in SCHEMAS and d.get("v", 1) <= EVENT_VERSION


def _refuse(name: str, value: Any) -> NoReturn:
    raise ValidationError(say(_ENVELOPE[name], "invalid", value), field=name)


def _lenient(cls: type[msgspec.Struct], d: Raw) -> Raw:
    """``d`` without the falsy values its Struct reads as defaults (`FALSY_IS_DEFAULT`), in
    it and in the objects it holds."""
    falsy, nested = _leniencies(cls)
    out = d
    for name in falsy:
        if name in out and not out[name]:
            out = {k: v for k, v in out.items() if k != name}
    for name, inner_cls in nested:
        inner = out.get(name)
        if isinstance(inner, dict):
            kept = _lenient(inner_cls, inner)
            if kept is not inner:
                out = {**out, name: kept}
    return out


@cache
def _leniencies(cls: type[msgspec.Struct]) -> tuple[tuple[str, ...], tuple[tuple[str, Any], ...]]:
    """A Struct's falsy-is-default fields, and its fields holding a Struct that has some."""
    nested = tuple(
        (name, f.nested) for name, f in fields_of(cls).items() if f.nested is not None and any(_leniencies(f.nested))
    )
    return getattr(cls, "FALSY_IS_DEFAULT", ()), nested


# --------------------------------------------------------------------------- msgspec's refusals, worded

_AT = re.compile(r"(.*) - at `\$(.*)`", re.S)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")
_OURS = re.compile(r"[a-z_]+(?:\.[a-z_]+)?: ")  # worded already, by a check after decoding
_KINDS = (
    (re.compile(r"Object missing required field `(.+)`"), "missing"),
    (re.compile(r"Expected `.+`, got `null`"), "missing"),
    (re.compile(r"Expected `(?:str|array)` of length >= \d+"), "empty"),
    (re.compile(r"Expected `str` of length <= (\d+)"), "long"),
    (re.compile(r"Expected `array` of length <= (\d+)"), "many"),
    (re.compile(r"Expected `.+`, got `.+`"), "type"),
    (re.compile(r"Object contains unknown field `(.+)`"), "unknown"),
)


def explain(cls: type[msgspec.Struct], exc: msgspec.ValidationError, raw: Raw) -> ValidationError:
    """msgspec's refusal of ``raw`` as ``cls``, in the words the refused field declares."""
    text = str(exc)
    at = _AT.fullmatch(text)
    said, path = (at[1], at[2]) if at else (text, "")
    if _OURS.match(said):
        return ValidationError(said, field=said.split(":")[0])
    kind, extra = "invalid", ""
    for rx, k in _KINDS:
        m = rx.match(said)
        if m:
            kind, extra = k, (m[1] if m.groups() else "")
            break
    steps: list[str | int] = [name if name else int(index) for name, index in _STEP.findall(path)]
    if kind == "missing" and extra:
        steps.append(extra)  # the missing field, inside the object the path names
    try:
        return _worded(cls, kind, extra, steps, raw)
    except Exception:  # noqa: BLE001 - the wording must not hide the refusal
        return ValidationError(f"{path.lstrip('.') or 'event'}: {said}", field=path.lstrip(".") or "event")


def _worded(cls: type[msgspec.Struct], kind: str, extra: str, steps: list[str | int], raw: Raw) -> ValidationError:
    owner: Any = cls
    here: Any = raw
    parent: Any = None
    name = ""
    field = listed = None
    in_list = False
    for step in steps:
        if isinstance(step, int):
            in_list, listed = True, field
            here = here[step] if isinstance(here, (list, tuple)) and step < len(here) else None
            owner = field.nested if field is not None else None
            continue
        declared = fields_of(owner) if owner is not None else {}
        if step not in declared:
            break
        field = declared[step]
        parent, here = here, (here.get(step) if isinstance(here, dict) else None)
        if not name:
            name = field.name
        elif field.name != step:
            name = field.name  # a field named for its holder (a body's format, a chain's seq)
        elif not in_list:
            name = f"{name}.{step}"
        owner = field.nested
    if steps and isinstance(steps[-1], int):
        kind, field = "entry", listed
    if field is None:
        raise LookupError(steps)
    value = extra if kind == "unknown" else here
    n = extra if kind in ("long", "many") else ""
    line = say(field, kind, value, name=name, n=n, parent=parent, event=raw, declared=fields_of(cls))
    return ValidationError(line, field=name)
