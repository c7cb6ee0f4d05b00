"""JSON-RPC 2.0 framing with no I/O: bytes in, request objects out, dicts back.

Rules:

1. One JSON value per line on the Unix socket; one per message on the WebSocket.
2. A line that is not JSON answers -32700 with ``id: null``; a value that is not
   a request object answers -32600. Neither closes the connection.
3. A request without ``id`` is a notification: it runs, nothing is answered.
4. A JSON array is a batch: each element answered, in one array.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import errors

try:
    import orjson as _json

    def _dumps(obj: Any) -> bytes:
        return _json.dumps(obj)

    def _loads(data: bytes | str) -> Any:
        return _json.loads(data)
except ImportError:  # pragma: no cover
    import json as _stdjson

    def _dumps(obj: Any) -> bytes:
        return _stdjson.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    def _loads(data: bytes | str) -> Any:
        return _stdjson.loads(data)


_MISSING = object()


@dataclass(frozen=True)
class Request:
    method: str
    params: dict[str, Any]
    id: Any = None
    is_notification: bool = False


@dataclass(frozen=True)
class Invalid:
    """A value that could not become a Request; answer with ``error``."""

    id: Any
    error: errors.ThrumError


def parse(data: bytes | str) -> Request | Invalid | list[Request | Invalid]:
    """Decode one frame into a request, an invalid marker, or a batch of those."""
    try:
        value = _loads(data)
    except ValueError as exc:
        return Invalid(None, errors.ParseError(f"parse error: {exc}"))
    if isinstance(value, list):
        if not value:
            return Invalid(None, errors.InvalidRequest("invalid request: empty batch"))
        return [_request(v) for v in value]
    return _request(value)


def _request(value: Any) -> Request | Invalid:
    if not isinstance(value, dict):
        return Invalid(None, errors.InvalidRequest("invalid request: expected a JSON object"))
    rid = value.get("id", _MISSING)
    if rid is not _MISSING and not (rid is None or isinstance(rid, (str, int, float))) or isinstance(rid, bool):
        return Invalid(None, errors.InvalidRequest("invalid request: id must be a string, number or null"))
    answer_id = None if rid is _MISSING else rid
    if value.get("jsonrpc") != "2.0":
        return Invalid(answer_id, errors.InvalidRequest('invalid request: "jsonrpc" must be "2.0"'))
    method = value.get("method")
    if not isinstance(method, str) or not method:
        return Invalid(answer_id, errors.InvalidRequest("invalid request: method must be a non-empty string"))
    params = value.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return Invalid(
            answer_id,
            errors.ValidationError("invalid params: params must be an object (named parameters)", field="params"),
        )
    return Request(method=method, params=params, id=answer_id, is_notification=rid is _MISSING)


def success(rid: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "result": result, "id": rid}


def failure(rid: Any, error: errors.ThrumError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": error.to_rpc(), "id": rid}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request(method: str, params: dict[str, Any] | None, rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": rid}


def encode(obj: Any) -> bytes:
    return _dumps(obj)


def encode_line(obj: Any) -> bytes:
    return _dumps(obj) + b"\n"


def decode(data: bytes | str) -> Any:
    return _loads(data)
