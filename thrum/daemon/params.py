"""Typed access to RPC params: every bad value becomes a -32602 naming its field.

Numbers are bounded even where a method sets no bound of its own: integers to
what JSON carries exactly (±2**53 - 1), reals to finite values of at most 1e15
in size, so no value can overflow a date, a timeout or an SQLite integer further in.
"""

from __future__ import annotations

import builtins
import math
from typing import Any, Literal, overload

from ..errors import ValidationError
from ..events.tags import split_tag, tag_fields

_MISSING: Any = object()
MAX_INT = 2**53 - 1
MAX_REAL = 1e15

Str = builtins.str  # inside the class, ``str`` ``int`` ``bool`` are its methods
Int = builtins.int
Bool = builtins.bool


class Params:
    def __init__(self, raw: dict[Str, Any], *, observer: Bool = False):
        self.raw = raw
        self._observer = observer

    @property
    def observing(self) -> Bool:
        """The call only watches: it came from an observer connection (the Web UI) or says
        ``observe: true``. Its ``caller`` is not marked as seen (thrum.daemon.presence)."""
        return self._observer or self.raw.get("observe") is True

    def __contains__(self, key: Str) -> Bool:
        return self.raw.get(key) is not None

    def _get(self, key: Str, required: Bool) -> Any:
        value = self.raw.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise ValidationError(f"invalid params: {key} is required", field=key)
            return _MISSING
        return value

    @overload
    def str(
        self,
        key: Str,
        *,
        required: Literal[True],
        default: Str | None = None,
        choices: tuple[Str, ...] | None = None,
        max_len: Int = 100_000_000,
        allow_empty: Bool = True,
    ) -> Str: ...

    @overload
    def str(
        self,
        key: Str,
        *,
        required: Bool = False,
        default: Str,
        choices: tuple[Str, ...] | None = None,
        max_len: Int = 100_000_000,
        allow_empty: Bool = True,
    ) -> Str: ...

    @overload
    def str(
        self,
        key: Str,
        *,
        required: Bool = False,
        default: None = None,
        choices: tuple[Str, ...] | None = None,
        max_len: Int = 100_000_000,
        allow_empty: Bool = True,
    ) -> Str | None: ...

    def str(
        self,
        key: Str,
        *,
        required: Bool = False,
        default: Str | None = None,
        choices: tuple[Str, ...] | None = None,
        max_len: Int = 100_000_000,
        allow_empty: Bool = True,
    ) -> Str | None:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            raise ValidationError(f"invalid params: {key} must be a string", field=key)
        if not allow_empty and not value:
            raise ValidationError(f"invalid params: {key} must not be empty", field=key)
        if len(value) > max_len:
            raise ValidationError(f"invalid params: {key} is too long (max {max_len})", field=key)
        if choices is not None and value not in choices:
            raise ValidationError(
                f"invalid params: {key} must be one of {', '.join(choices)} (got {value[:40]!r})", field=key
            )
        return value

    def bool(self, key: Str, default: Bool = False) -> Bool:
        value = self._get(key, False)
        if value is _MISSING:
            return default
        if not isinstance(value, builtins.bool):
            raise ValidationError(f"invalid params: {key} must be true or false", field=key)
        return value

    @overload
    def int(
        self,
        key: Str,
        *,
        default: Int,
        minimum: Int | None = None,
        maximum: Int | None = None,
        required: Bool = False,
    ) -> Int: ...

    @overload
    def int(
        self,
        key: Str,
        *,
        default: None = None,
        minimum: Int | None = None,
        maximum: Int | None = None,
        required: Literal[True],
    ) -> Int: ...

    @overload
    def int(
        self,
        key: Str,
        *,
        default: None = None,
        minimum: Int | None = None,
        maximum: Int | None = None,
        required: Bool = False,
    ) -> Int | None: ...

    def int(
        self,
        key: Str,
        *,
        default: Int | None = None,
        minimum: Int | None = None,
        maximum: Int | None = None,
        required: Bool = False,
    ) -> Int | None:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if isinstance(value, builtins.bool) or not isinstance(value, builtins.int):
            raise ValidationError(f"invalid params: {key} must be an integer", field=key)
        minimum = -MAX_INT if minimum is None else minimum
        maximum = MAX_INT if maximum is None else maximum
        if minimum is not None and value < minimum:
            raise ValidationError(f"invalid params: {key} must be at least {minimum}", field=key)
        if maximum is not None and value > maximum:
            raise ValidationError(f"invalid params: {key} must be at most {maximum}", field=key)
        return value

    @overload
    def number(
        self, key: Str, *, default: float, minimum: float | None = None, maximum: float | None = None
    ) -> float: ...

    @overload
    def number(
        self, key: Str, *, default: None = None, minimum: float | None = None, maximum: float | None = None
    ) -> float | None: ...

    def number(
        self, key: Str, *, default: float | None = None, minimum: float | None = None, maximum: float | None = None
    ) -> float | None:
        value = self._get(key, False)
        if value is _MISSING:
            return default
        if isinstance(value, builtins.bool) or not isinstance(value, (builtins.int, float)):
            raise ValidationError(f"invalid params: {key} must be a number", field=key)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValidationError(f"invalid params: {key} must be a finite number", field=key)
        minimum = -MAX_REAL if minimum is None else minimum
        maximum = MAX_REAL if maximum is None else maximum
        if minimum is not None and value < minimum:
            raise ValidationError(f"invalid params: {key} must be at least {minimum}", field=key)
        if maximum is not None and value > maximum:
            raise ValidationError(f"invalid params: {key} must be at most {maximum}", field=key)
        return float(value)

    def str_list(self, key: Str, *, required: Bool = False, max_items: Int = 10_000, single: Bool = True) -> list[Str]:
        """A list of strings; ``single``: one string stands for a list of one (addresses)."""
        value = self._get(key, required)
        if value is _MISSING:
            return []
        if isinstance(value, builtins.str) and single:
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, builtins.str) for v in value):
            raise ValidationError(f"invalid params: {key} must be a list of strings", field=key)
        if required and not value:
            raise ValidationError(f"invalid params: {key} must not be empty", field=key)
        if len(value) > max_items:
            raise ValidationError(f"invalid params: {key} has more than {max_items} items", field=key)
        return value

    def tag(self, key: Str) -> dict[Str, Str] | None:
        """A ``{"type", "value"}`` object (or ``"type:value"`` string)."""
        value = self._get(key, False)
        if value is _MISSING:
            return None
        return _tag(value, key)

    def tags(self, key: Str) -> list[dict[Str, Str]]:
        value = self._get(key, False)
        if value is _MISSING:
            return []
        if not isinstance(value, list):
            raise ValidationError(f"invalid params: {key} must be a list of {{type, value}} objects", field=key)
        return [_tag(v, key) for v in value]

    def any(self, key: Str) -> Any:
        value = self._get(key, False)
        return None if value is _MISSING else value


def _tag(value: Any, key: str) -> dict[str, str]:
    if isinstance(value, str):
        if ":" not in value:
            raise ValidationError(f"invalid params: {key} must look like type:value (got {value[:60]!r})", field=key)
        parts = split_tag(value)
    else:
        parts = tag_fields(value) if isinstance(value, dict) else None
    if parts is None:
        raise ValidationError(f"invalid params: {key} must be an object with non-empty type and value", field=key)
    return {"type": parts[0], "value": parts[1]}
