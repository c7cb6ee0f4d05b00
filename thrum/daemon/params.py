"""Typed access to RPC params: every bad value becomes a -32602 naming its field.

Numbers are bounded even where a method sets no bound of its own: integers to
what JSON carries exactly (±2**53 - 1), reals to finite values of at most 1e15
in size, so no value can overflow a date, a timeout or an SQLite integer further in.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import ValidationError
from ..events.tags import split_tag, tag_fields

_MISSING = object()
MAX_INT = 2**53 - 1
MAX_REAL = 1e15


class Params:
    def __init__(self, raw: dict, *, observer: bool = False):
        self.raw = raw
        self._observer = observer

    @property
    def observing(self) -> bool:
        """The call only watches: it came from an observer connection (the Web UI) or says
        ``observe: true``. Its ``caller`` is not marked as seen (thrum.daemon.presence)."""
        return self._observer or self.raw.get("observe") is True

    def __contains__(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def _get(self, key, required):
        value = self.raw.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise ValidationError(f"invalid params: {key} is required", field=key)
            return _MISSING
        return value

    def str(
        self,
        key: str,
        *,
        required: bool = False,
        default: str | None = None,
        choices: tuple | None = None,
        max_len: int = 100_000_000,
        allow_empty: bool = True,
    ) -> str | None:
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

    def bool(self, key: str, default: bool = False) -> bool:
        value = self._get(key, False)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            raise ValidationError(f"invalid params: {key} must be true or false", field=key)
        return value

    def int(
        self,
        key: str,
        *,
        default: int | None = None,
        minimum: int | None = None,
        maximum: int | None = None,
        required: bool = False,
    ) -> int | None:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"invalid params: {key} must be an integer", field=key)
        minimum = -MAX_INT if minimum is None else minimum
        maximum = MAX_INT if maximum is None else maximum
        if minimum is not None and value < minimum:
            raise ValidationError(f"invalid params: {key} must be at least {minimum}", field=key)
        if maximum is not None and value > maximum:
            raise ValidationError(f"invalid params: {key} must be at most {maximum}", field=key)
        return value

    def number(
        self, key: str, *, default: float | None = None, minimum: float | None = None, maximum: float | None = None
    ) -> float | None:
        value = self._get(key, False)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
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

    def str_list(self, key: str, *, required: bool = False, max_items: int = 10_000) -> list[str]:
        value = self._get(key, required)
        if value is _MISSING:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValidationError(f"invalid params: {key} must be a list of strings", field=key)
        if required and not value:
            raise ValidationError(f"invalid params: {key} must not be empty", field=key)
        if len(value) > max_items:
            raise ValidationError(f"invalid params: {key} has more than {max_items} items", field=key)
        return value

    def tag(self, key: str) -> dict | None:
        """A ``{"type", "value"}`` object (or ``"type:value"`` string)."""
        value = self._get(key, False)
        if value is _MISSING:
            return None
        return _tag(value, key)

    def tags(self, key: str) -> list[dict]:
        value = self._get(key, False)
        if value is _MISSING:
            return []
        if not isinstance(value, list):
            raise ValidationError(f"invalid params: {key} must be a list of {{type, value}} objects", field=key)
        return [_tag(v, key) for v in value]

    def any(self, key: str) -> Any:
        value = self._get(key, False)
        return None if value is _MISSING else value


def _tag(value, key) -> dict:
    if isinstance(value, str):
        if ":" not in value:
            raise ValidationError(f"invalid params: {key} must look like type:value (got {value[:60]!r})", field=key)
        parts = split_tag(value)
    else:
        parts = tag_fields(value) if isinstance(value, dict) else None
    if parts is None:
        raise ValidationError(f"invalid params: {key} must be an object with non-empty type and value", field=key)
    return {"type": parts[0], "value": parts[1]}
