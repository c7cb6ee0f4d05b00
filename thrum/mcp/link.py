"""The MCP server's connection to the daemon: one persistent async connection that
carries every tool call and the push notifications, re-made after a daemon restart.

Rules:

1. Tool calls share one `thrum.client_async.AsyncClient` (requests are matched by
   id, so a blocked wait holds nothing up). With no connection at hand, a tool
   call starts the daemon when needed, as the CLI does, and waits for the
   connection loop to come back.
2. The connection loop (`run`) never starts the daemon itself: a deliberate
   ``thrum daemon stop`` is respected until someone needs the daemon again.
3. On every new connection the agent is made known (registered from its
   identity file when the daemon does not know it: a rebuilt database, a fresh
   clone), a heartbeat is sent (and every `HEARTBEAT_S` after): the daemon sees
   the agent and writes an ``agent.heartbeat`` to the log when one is due, so the
   agent shows as active on every machine while its MCP server runs
   (docs/design/presence.md), then the connection tasks
   (the waiter's subscription) are started.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import anyio
import anyio.lowlevel

from ..client_async import AsyncClient, ensure_daemon, reconnecting
from ..errors import IdentityError, ThrumError, Timeout, Unavailable
from ..identity import register_params
from ..lifecycle import autostart_disabled

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from ..identity import Identity
    from ..paths import ThrumPaths

log = logging.getLogger(__name__)

HEARTBEAT_S = 60.0  # = the default presence_interval: a log heartbeat a minute, inside the 2-minute window
RECONNECT_WAIT_S = 60.0  # how long a tool call waits for the connection after starting the daemon
NO_AUTOSTART_GRACE_S = 1.0  # without autostart: a daemon that is just restarting gets this long

ConnectionTask = Callable[..., Awaitable[None]]  # (client, *, task_status) -> runs until cancelled


class SetupRefused(ThrumError):
    """The daemon refused to register this agent (its name taken with another key, a
    deleted agent's name, a bad identity file): retrying cannot help; every tool call
    fails with this one line until a later connection's set-up succeeds."""


class DaemonLink:
    def __init__(self, paths: ThrumPaths, ident: Identity) -> None:
        self.paths = paths
        self.ident = ident
        self.client: AsyncClient | None = None
        self.connected = anyio.Event()  # set while a connection is up; replaced when it drops
        self._kick = anyio.Event()
        self._tasks: list[ConnectionTask] = []
        self._handlers: list[Callable[[str, dict[str, Any]], None]] = []
        self.connections = 0  # connections made so far (1 after start-up)
        self.refused: SetupRefused | None = None  # why the last set-up could not register the agent

    @property
    def me(self) -> str:
        return self.ident.name

    def add_connection_task(self, task: ConnectionTask) -> None:
        self._tasks.append(task)

    def add_notification_handler(self, handler: Callable[[str, dict[str, Any]], None]) -> None:
        self._handlers.append(handler)

    # ------------------------------------------------------------------ calls

    async def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (as AsyncClient.call)
    ) -> Any:
        """One RPC on the shared connection (connecting, and starting the daemon, when needed)."""
        client = await self.ensure_connected()
        return await client.call(method, params, timeout=timeout)

    async def agent_call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        """`call` as this agent (adds ``caller``); registers the agent from its identity file
        and retries once when the daemon does not know it."""
        params = {"caller": self.me, **(params or {})}
        try:
            return await self.call(method, params, **kw)
        except IdentityError:
            await self._register(await self.ensure_connected())
            return await self.call(method, params, **kw)

    def is_connected(self) -> bool:
        return self.client is not None and not self.client.closed.is_set()

    async def wait_connected(self) -> None:
        """Return once a connection is up (cancel from outside to bound it)."""
        while not self.is_connected():
            await self.connected.wait()
            # set but already closed: the loop is tearing that connection down; let it
            await anyio.lowlevel.checkpoint()

    async def ensure_connected(self) -> AsyncClient:
        """The current connection; without one, start the daemon if needed and wait for the loop.

        Raises:
            Unavailable: the daemon cannot be started (autostart off, not initialised) or
                the connection did not come back in time.
        """
        if self.is_connected() and self.client is not None:
            return self.client
        if self.refused is not None:
            raise self.refused
        autostart = not autostart_disabled()
        if autostart:
            await ensure_daemon(self.paths)
        self._kick.set()
        with anyio.move_on_after(RECONNECT_WAIT_S if autostart else NO_AUTOSTART_GRACE_S):
            await self.wait_connected()
        if self.is_connected() and self.client is not None:
            return self.client
        if autostart:
            raise Unavailable("could not reconnect to the thrum daemon; check `thrum daemon status`")
        raise Unavailable(
            "thrum daemon is not running and THRUM_NO_AUTOSTART=1 is set; start it with `thrum daemon start`"
        )

    # ------------------------------------------------------------------ the loop

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the connection for ever; ``started`` once the first set-up is done (or failed)."""
        started = False

        def mark_started() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        async def session(client: AsyncClient) -> None:
            await self._welcome(client)
            async with anyio.create_task_group() as tg:
                for task in self._tasks:
                    await tg.start(_guarded, task, client)
                self.connections += 1
                self.client = client
                self.connected.set()
                mark_started()
                tg.start_soon(self._heartbeats, client)
                await client.closed.wait()
                tg.cancel_scope.cancel()

        def disconnected(reason: str) -> None:
            if self.client is not None or self.connected.is_set():
                log.warning("lost the connection to the thrum daemon (%s); reconnecting", reason)
            else:
                log.debug("no connection to the thrum daemon yet: %s", reason)
            self.client = None
            if self.connected.is_set():
                self.connected = anyio.Event()
            mark_started()

        await reconnecting(
            self.paths, session, on_notification=self._notify, kick=self._next_kick, on_disconnect=disconnected
        )

    def _next_kick(self) -> anyio.Event:
        if self._kick.is_set():
            self._kick = anyio.Event()
        return self._kick

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        for handler in self._handlers:
            handler(method, params)

    async def _welcome(self, client: AsyncClient) -> None:
        """Make the agent known and seen on a new connection.

        Raises:
            SetupRefused: the daemon refused to register the agent (kept in `refused`,
                so tool calls fail with it at once instead of waiting for a connection).
        """
        params = {"caller": self.me}
        try:
            await client.call("session.heartbeat", params)
        except IdentityError:
            await self._register(client)
            await client.call("session.heartbeat", params)
        self.refused = None

    async def _register(self, client: AsyncClient) -> None:
        """Register the agent from its identity file, with the same params as the CLI."""
        try:
            await client.call("agent.register", register_params(self.ident, self.paths.repo))
        except (Unavailable, Timeout):
            raise
        except ThrumError as exc:
            self.refused = SetupRefused(f"the thrum daemon refused to register @{self.me}: {exc.message}")
            raise self.refused from None

    async def _heartbeats(self, client: AsyncClient) -> None:
        while True:
            await anyio.sleep(HEARTBEAT_S)
            try:
                await self._welcome(client)
            except ThrumError as exc:
                log.warning("heartbeat failed: %s", exc.message)
                if client.closed.is_set():
                    return


async def _guarded(
    task: ConnectionTask, client: AsyncClient, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Run a connection task; if it fails, drop the connection (the loop makes a new one)."""
    once = _StartedOnce(task_status)
    try:
        await task(client, task_status=once)
    except ThrumError as exc:
        log.warning("connection set-up failed (%s); reconnecting", exc.message)
    except Exception:
        log.exception("connection task failed; reconnecting")
    once.started()
    await client.aclose()


class _StartedOnce:
    """A task_status that forwards only the first ``started``."""

    def __init__(self, task_status: TaskStatus[None]) -> None:
        self._task_status = task_status
        self.done = False

    def started(self, value: None = None) -> None:
        if not self.done:
            self.done = True
            self._task_status.started(value)
