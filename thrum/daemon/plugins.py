"""Daemon plugins: parts of the daemon that live in a package of their own (the Web UI, thrum/ui/).

A plugin never imports the daemon, and the daemon never sets its attributes: it is
made from plain values (paths, settings) before the transports, so the WebSocket's
gate can admit the plugin's browser page (``browser``); it is started once the
WebSocket listens, with a `PluginHost` (the nursery it runs in, the connection
registry its own listeners are admitted by, the WebSocket's port); it stops with the
daemon's nursery. Services reach it through the service context (``ui.open``,
``ui.signout``: `UiPlugin`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import trio

from ..config import Config
from ..paths import ThrumPaths

if TYPE_CHECKING:
    from .limits import Registry
    from .wsgate import BrowserAccess


@dataclass(frozen=True)
class PluginHost:
    """What a started plugin may use of the daemon."""

    nursery: trio.Nursery  # its tasks and listeners run (and stop) here
    registry: Registry  # admits its connections under the daemon's cap and clocks
    ws_port: int  # the daemon's WebSocket (a browser page talks to the daemon there)


@runtime_checkable
class Plugin(Protocol):
    name: str

    @property
    def browser(self) -> BrowserAccess | None:
        """A browser page the WebSocket admits (its origins and session), or None."""
        ...

    async def start(self, host: PluginHost) -> None:
        """Called once the WebSocket listens; returns once the plugin runs."""
        ...


@runtime_checkable
class UiPlugin(Plugin, Protocol):
    """The Web UI as the ``ui.*`` services use it."""

    async def open(self, port: int | None, *, handover: bool = False) -> dict[str, Any]: ...

    async def sign_out(self) -> dict[str, Any]: ...


def load_plugins(paths: ThrumPaths, config: Config) -> list[Plugin]:
    """The plugins this daemon runs: the Web UI (it listens only once ``ui.open`` asks)."""
    from ..ui.hook import WebUi, preferred_port

    return [WebUi(paths.var, preferred_port(config.values))]


def web_ui(plugins: list[Plugin]) -> UiPlugin | None:
    """The plugin the ``ui.*`` services talk to, if this daemon runs one."""
    return next((p for p in plugins if isinstance(p, UiPlugin)), None)
