"""Parts of the daemon started after the store: hub, WebSocket server, sync loop."""

from __future__ import annotations

import trio


async def start(daemon, nursery: trio.Nursery) -> None:
    from . import ws
    from .hub import Hub

    daemon.hub = Hub(daemon)
    daemon.writer.subscribers.append(daemon.hub.publish)
    daemon.ws_port = await nursery.start(ws.serve_ws, daemon)
    from . import syncer

    daemon.sync = syncer.SyncLoop(daemon)
    await nursery.start(daemon.sync.run)


async def stop(daemon) -> None:
    if daemon.sync is not None:
        await daemon.sync.stop()
    if daemon.hub is not None:
        daemon.hub.close()
