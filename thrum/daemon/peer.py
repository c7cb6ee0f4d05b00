"""Who is at the other end of a Unix socket connection, and what only the local user's
own CLI may ask for.

Rules (docs/design/remotes.md, "What `thrum sync` passes along"):

1. The peer of a Unix socket connection is known by the kernel's word: its user id from
   ``SO_PEERCRED`` (Linux) or ``LOCAL_PEERCRED`` (macOS), read once at accept. A
   WebSocket client (the browser UI, a tool holding the token) has no such word: it
   is never "the local user", whatever it presents.
2. Variables of a caller's environment (logins for the remote) are taken only from a
   connection whose peer runs as the daemon's own user over the Unix socket. The
   socket is born 0600, so this is a second wall: a socket whose mode was loosened,
   or a descriptor passed to another user, still carries its peer's real user id.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any

import trio

from .. import errors

__all__ = ["peer_uid", "require_own_user"]

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_XUCRED_HEAD = struct.Struct("IIh")  # struct xucred: version, uid, ngroups (then the groups)
_SOL_LOCAL = 0  # macOS: the level of LOCAL_PEERCRED


def peer_uid(sock: socket.socket | trio.socket.SocketType) -> int | None:
    """The user id of the process at the other end of a connected Unix socket (None:
    the platform does not say, or the socket is not a Unix socket)."""
    try:
        if hasattr(socket, "SO_PEERCRED"):
            _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
            return int(uid)
        if hasattr(socket, "LOCAL_PEERCRED"):
            raw = sock.getsockopt(_SOL_LOCAL, socket.LOCAL_PEERCRED, 128)
            return int(_XUCRED_HEAD.unpack_from(raw)[1])
    except (OSError, struct.error):
        return None
    return None


def require_own_user(conn: Any, what: str) -> None:
    """Refuse ``what`` unless ``conn`` is a Unix socket connection from this daemon's own user.

    Raises:
        Forbidden: a WebSocket client, or a peer of another (or an unknown) user.
    """
    if getattr(conn, "transport", None) != "unix":
        raise errors.Forbidden(
            f"{what} is accepted only from the local user's own `thrum` over the Unix socket, not over the WebSocket"
        )
    if getattr(conn, "peer_uid", None) != os.geteuid():  # SO_PEERCRED reports the effective user
        raise errors.Forbidden(
            f"{what} is accepted only from the local user's own `thrum` over the Unix socket; "
            "this connection's peer runs as another user"
        )
