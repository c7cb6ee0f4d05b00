"""One error tree for the whole product.

Every error a user can cause or meet is a `ThrumError` subclass carrying the
JSON-RPC code the daemon answers with and a one-line message a person can act
on. Foreign exceptions (sqlite3, pygit2, OSError) are translated into these at
the boundary that calls them, never leaked to clients.

Codes are stable: clients (the CLI, MCP server, scripts) match on them.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: short-lived front ends (thrum-gc-mail) start without importing typing
if TYPE_CHECKING:
    from typing import Any

# Standard JSON-RPC 2.0 codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Application codes (-32000 .. -32099 is reserved for implementation errors).
NOT_FOUND = -32001
FORBIDDEN = -32002
CONFLICT = -32003
UNKNOWN_RECIPIENT = -32004
IDENTITY_ERROR = -32005
SYNC_ERROR = -32006
TIMEOUT = -32007
UNAVAILABLE = -32008
KEY_RETIRED = -32009


class ThrumError(Exception):
    """Base of every error thrum reports to a user."""

    code: int = INTERNAL_ERROR

    def __init__(self, message: str, *, data: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.data = data

    def to_rpc(self) -> dict[str, Any]:
        err = {"code": self.code, "message": self.message}
        if self.data:
            err["data"] = self.data
        return err


class ValidationError(ThrumError):
    """Input that breaks a rule: a bad field, value or shape."""

    code = INVALID_PARAMS

    def __init__(self, message: str, *, field: str | None = None, data: dict[str, Any] | None = None):
        if field and data is None:
            data = {"field": field}
        super().__init__(message, data=data)
        self.field = field


class ParseError(ThrumError):
    code = PARSE_ERROR


class InvalidRequest(ThrumError):
    code = INVALID_REQUEST


class MethodNotFound(ThrumError):
    code = METHOD_NOT_FOUND


class NotFound(ThrumError):
    code = NOT_FOUND


class Forbidden(ThrumError):
    code = FORBIDDEN


class Conflict(ThrumError):
    code = CONFLICT


class UnknownRecipient(ThrumError):
    code = UNKNOWN_RECIPIENT


class IdentityError(ThrumError):
    code = IDENTITY_ERROR


class SyncFailed(ThrumError):
    code = SYNC_ERROR


class Timeout(ThrumError):
    code = TIMEOUT


class Unavailable(ThrumError):
    """The daemon (or something it needs) cannot be reached."""

    code = UNAVAILABLE


class KeyRetired(ThrumError):
    """The writer's key was revoked or rotated away: every replica would refuse what it signs,
    so nothing is written in its name (docs/design/trust.md). Not an `IdentityError`: the
    agent is known here, and registering it again would not help."""

    code = KEY_RETIRED


_BY_CODE = {
    cls.code: cls
    for cls in (
        ValidationError,
        ParseError,
        InvalidRequest,
        MethodNotFound,
        NotFound,
        Forbidden,
        Conflict,
        UnknownRecipient,
        IdentityError,
        SyncFailed,
        Timeout,
        Unavailable,
        KeyRetired,
    )
}


def from_rpc(error: dict[str, Any]) -> ThrumError:
    """Rebuild a typed error from a JSON-RPC error object (client side)."""
    code = error.get("code", INTERNAL_ERROR) if isinstance(error, dict) else INTERNAL_ERROR
    message = error.get("message", "unknown error") if isinstance(error, dict) else str(error)
    data = error.get("data") if isinstance(error, dict) else None
    cls = _BY_CODE.get(code, ThrumError)
    exc: ThrumError
    if cls is ValidationError:
        exc = ValidationError(message, data=data if isinstance(data, dict) else None)
    else:
        exc = cls(message, data=data if isinstance(data, dict) else None)
    exc.code = code
    return exc
