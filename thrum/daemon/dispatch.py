"""The method table and the one place where exceptions become JSON-RPC errors.

A handler is ``async def handler(call: Call) -> result``; it raises a
`ThrumError` for anything the caller did wrong. Any other exception is logged
with its traceback and answered as -32603 without details: the daemon survives
every input.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import trio

from .. import errors, jsonrpc
from .context import ServiceContext
from .params import Params

log = logging.getLogger(__name__)

Handler = Callable[["Call"], Awaitable[Any]]
METHODS: dict[str, Handler] = {}


def method(name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        if name in METHODS:
            raise RuntimeError(f"RPC method {name} registered twice")
        METHODS[name] = fn
        return fn

    return register


@dataclass
class Call:
    ctx: ServiceContext  # what a service may use of the daemon (thrum.daemon.context)
    conn: Any  # thrum.daemon.connection.Connection (or a WebSocket connection)
    params: Params
    method: str


async def handle(services: ServiceContext, conn: Any, req: jsonrpc.Request | jsonrpc.Invalid) -> dict[str, Any] | None:
    """Answer one request (None for notifications)."""
    if isinstance(req, jsonrpc.Invalid):
        return jsonrpc.failure(req.id, req.error)
    fn = METHODS.get(req.method)
    try:
        if fn is None:
            raise errors.MethodNotFound(f"method not found: {req.method}")
        params = Params(req.params, observer=getattr(conn, "observer", False))
        result = await fn(Call(services, conn, params, req.method))
    except errors.ThrumError as exc:
        if req.is_notification:
            return None
        return jsonrpc.failure(req.id, _as_params_error(exc))
    except trio.Cancelled:
        raise
    except Exception:
        log.exception("internal error in %s", req.method)
        if req.is_notification:
            return None
        return jsonrpc.failure(req.id, errors.ThrumError(f"internal error in {req.method}; see daemon.log"))
    if req.is_notification:
        return None
    return jsonrpc.success(req.id, result)


INVALID_PARAMS_HEAD = "invalid params: "


def _as_params_error(exc: errors.ThrumError) -> errors.ThrumError:
    """Every -32602 says what it is, wherever the rule that refused it lives (the store's
    paging rules, the search language, ...): its message starts with "invalid params:"."""
    if isinstance(exc, errors.ValidationError) and not exc.message.startswith(INVALID_PARAMS_HEAD):
        return errors.ValidationError(INVALID_PARAMS_HEAD + exc.message, field=exc.field, data=exc.data)
    return exc


async def handle_frame(services: ServiceContext, conn: Any, data: bytes | str, *, max_batch: int = 100) -> Any:
    """Parse one frame (line or WebSocket message) and answer it (None: nothing to send).

    A batch runs its requests one after another and answers in one array; it may
    hold at most ``max_batch`` requests (a larger one would be one line holding
    thousands of replies in memory at once).
    """
    parsed = jsonrpc.parse(data)
    del data
    if isinstance(parsed, list):
        if len(parsed) > max_batch:
            return jsonrpc.failure(
                None,
                errors.InvalidRequest(
                    f"invalid request: a batch may hold at most {max_batch} requests (got {len(parsed)})"
                ),
            )
        answers = []
        for req in parsed:
            a = await handle(services, conn, req)
            if a is not None:
                answers.append(a)
        return answers or None
    return await handle(services, conn, parsed)
