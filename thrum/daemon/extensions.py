"""Parts of the daemon started after the store: hub, Web UI, WebSocket, sync loop, held lines, delivery, wake-ups."""

from __future__ import annotations

import trio


async def start(daemon, nursery: trio.Nursery) -> None:
    from functools import partial

    from ..ui import hook as web_ui
    from . import ws
    from .delivery import DeliveryRecorder
    from .hub import Hub
    from .wakeups import Waker

    daemon.hub = Hub(daemon)
    daemon.writer.subscribers.append(daemon.hub.publish)
    daemon.registry.served = daemon.hub.served  # subscribed connections are never evicted as idle
    ui = web_ui.install(daemon)  # the Web UI listens on demand (`ui.open`); its page uses this WebSocket
    daemon.ws_port = await nursery.start(partial(ws.serve_ws, daemon, browser=ui.access))
    await ui.resume()  # an open page's session outlives a restart: listen where it expects us
    from . import syncer

    daemon.sync = syncer.SyncLoop(daemon)
    await nursery.start(daemon.sync.run)
    recorder = DeliveryRecorder(daemon.writer.read, daemon.writer.write, daemon.keys.names)
    daemon.writer.subscribers.append(recorder.on_applied)
    daemon.delivery = recorder
    await nursery.start(recorder.run)
    waker = Waker(daemon.writer.read, recorder.flush, daemon.paths.var / "panes.json")
    daemon.writer.subscribers.append(waker.on_applied)
    daemon.waker = waker
    await nursery.start(waker.run)
    from .heldtimer import HeldTimer

    await nursery.start(HeldTimer(daemon.writer, float(daemon.config.clock_skew)).run)


async def stop(daemon) -> None:
    if daemon.sync is not None:
        await daemon.sync.stop()
    if daemon.hub is not None:
        daemon.hub.close()
