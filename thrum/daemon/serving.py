"""What a transport (the Unix socket, the WebSocket) needs of the daemon, as one record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .connection import Connection
    from .context import ServiceContext
    from .hub import Hub
    from .limits import Registry


@dataclass(frozen=True)
class Serving:
    """The services every request reaches, the limits every connection lives under, and the
    hub: a subscribed connection is not idle, and its subscriptions end with it."""

    services: ServiceContext
    registry: Registry
    hub: Hub
    connections: set[Connection]  # open connections of both transports (``daemon.status``)
    queue_size: int  # notifications a connection's outbox holds (config: ws_queue_size)

    def opened(self, conn: Connection) -> None:
        self.connections.add(conn)

    def closed(self, conn: Connection) -> None:
        self.connections.discard(conn)
        self.hub.connection_closed(conn)
