#!/usr/bin/env python3
"""Soak (issue 15): honest load, syncs and an abusive client against one daemon for N minutes.

Run through ``scripts/bench.py soak --minutes N`` or directly with the venv's python::

    python scripts/bench_soak.py [--minutes 10] [--json out.json]

Two replicas (clones of one bare remote, each with its own daemon). Against
replica A, for N minutes:

- 10 senders (one agent each; a few ms of think time; some messages mention the
  MCP waiter, the CLI waiter, their shared role, a sender or the senders' role) and
  1 slow sender on replica B (some of its messages mention the waiters too, and
  reach them through a sync), so every sync has news both ways;
- 10 readers: inbox pages, unread mentions, a message by id, counts;
- 5 WebSocket subscribers (``all``): an honest client that acts on
  ``notification.dropped`` (its outbox overflowed: the daemon drops the oldest
  and says so) by subscribing again with ``since_event_id`` = the last event it
  read before the notice, and skips events it has seen (by ``event_id``);
- the MCP waiter: a real ``thrum mcp serve`` (stdio) for agent ``waiter``, started
  by the official MCP client (``stdio_client`` + ``ClientSession``), calling
  ``wait_for_message`` in a loop and ``check_messages`` now and then;
- a CLI waiter (agent ``cliwaiter``): what ``thrum wait --mentions`` does,
  ``message.wait`` then mark read (the daemon's long-poll, which the MCP waiter
  does not use);
- a sync of A then B every few seconds;
- an abusive client taking turns: slowloris lines, 20,000 pipelined requests it
  never reads, a 40 MB line, a 20 MB unfinished line, 300 idle connections, a
  WebSocket frame that never ends.

Honest clients retry a timed-out write with the same idempotency key (what a
careful client does) and count it as an error all the same. At the end: final
syncs, then both replicas' logs must be byte-identical and every acknowledged
message present exactly once in each, and in each view; every subscriber must
have every acknowledged message (lost after resume: 0), and each waiter every
acknowledged message that mentions it exactly once (none lost, none twice). The
subscribers and waiters get a bounded time after the final syncs to drain.
Prints throughput, latency percentiles (wake-ups: from the send's reply to the
waiter's result), errors, and RSS and descriptors sampled over time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import math
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from fixtures.daemon_env import daemon_env  # noqa: E402
from fixtures.repos.builders import make_replicas  # noqa: E402
from thrum import errors, identity, lifecycle  # noqa: E402
from thrum.client import Client  # noqa: E402
from bench_table import print_table  # noqa: E402

THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")
MCP_AGENT, CLI_AGENT, WAITER_ROLE = "waiter", "cliwaiter", "watcher"
# who a message addressed like this should wake (the waiters share the role)
WAKES = {
    MCP_AGENT: frozenset({f"@{MCP_AGENT}", f"@{WAITER_ROLE}"}),
    CLI_AGENT: frozenset({f"@{CLI_AGENT}", f"@{WAITER_ROLE}"}),
}
# a mentioning send picks one of these: each waiter is woken by 2 in 9 (about 7 % of all sends)
MENTIONS = (f"@{MCP_AGENT}", f"@{CLI_AGENT}", f"@{WAITER_ROLE}") + ("@s?", "@sender") * 3
SLOW_PAUSE = (10.0, 3.0)  # the slow subscriber reads for 10 s, then not at all for 3 s
# Its receive buffer: small, so that a pause overflows the daemon's outbox at once, yet not
# tiny: with 4 KiB, loopback TCP waited on delayed acknowledgements and carried ~16
# notifications a second once the traffic stopped (a replay of 1,300 took 90 s).
SLOW_RCVBUF = 64 * 1024
TRACE = os.environ.get("THRUM_SOAK_TRACE")  # a file: what two subscribers received, in order, and who lost what
CHECK_EVERY = 10.0  # seconds between the MCP waiter's check_messages calls
DRAIN_S = 90.0  # after the final syncs: how long subscribers and waiters get to receive the rest

SYNC_CONFIG = {"local_only": False, "ws_port": 0, "sync_interval": 3600, "sync_debounce": 3600}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


def proc_status(pid: int) -> dict[str, float]:
    """RSS, its anonymous and file-backed parts (MiB), and threads, from /proc/<pid>/status.

    File-backed pages are mostly the projection database mapped by SQLite (mmap_size):
    the kernel's page cache, growing with the database and reclaimable. Anonymous
    memory is the daemon's own: that is what must stay flat.
    """
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
        elif key == "Threads":
            out[key] = int(value)
    return out


def _span(values: list[float]) -> str:
    """Where in the run a set of times falls: "first-last s" (empty: none)."""
    return f"{min(values):.0f}-{max(values):.0f} s" if values else ""


def rss_mib(pid: int) -> float:
    return proc_status(pid).get("VmRSS", float("nan"))


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Replica:
    def __init__(self, repo: Path):
        with daemon_env():  # the soak's settings, not the caller's THRUM_* overrides
            self.paths = lifecycle.init_repo(repo, start_daemon=False)
            self.paths.config.write_text(json.dumps(SYNC_CONFIG))
            lifecycle.start(self.paths)
        self.pid = lifecycle.read_pid(self.paths)
        self.root = self.paths.main_repo / ".git" / "thrum-sync" / "a-sync"

    def client(self, timeout: float = 60.0) -> Client:
        return Client(self.paths, timeout=timeout)

    def call(self, method: str, params: dict | None = None, timeout: float = 120.0):
        with self.client(timeout) as c:
            return c.call(method, params)

    def shards(self) -> dict[str, bytes]:
        return {p.relative_to(self.root).as_posix(): p.read_bytes() for p in sorted(self.root.rglob("*.jsonl"))}

    def create_counts(self) -> collections.Counter:
        counts: collections.Counter = collections.Counter()
        for data in self.shards().values():
            for line in data.splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("type") == "message.create":
                    counts[event["message_id"]] += 1
        return counts

    def stop(self) -> None:
        lifecycle.stop(self.paths)


class Record:
    """Everything the clients observed, under one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latency: dict[str, list[float]] = collections.defaultdict(list)
        self.errors: dict[str, list[str]] = collections.defaultdict(list)
        self.acked: list[str] = []  # every acknowledged message, both replicas
        self.acked_a: list[str] = []  # those acknowledged by replica A (readers look them up there)
        self.acked_at: dict[str, float] = {}  # message id -> time.monotonic() of the send's reply
        self.to: dict[str, str] = {}  # message id -> the address it was sent to (mentions only)

    def ok(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.latency[kind].append(seconds * 1000)

    def error(self, kind: str, exc: BaseException) -> None:
        with self.lock:
            self.errors[kind].append(f"{type(exc).__name__}: {exc}"[:300])

    def ack(self, mid: str, on_a: bool, to: str | None = None) -> None:
        at = time.monotonic()
        with self.lock:
            self.acked.append(mid)
            if on_a:
                self.acked_a.append(mid)
                self.acked_at[mid] = at
            if to:
                self.to[mid] = to

    def expected_for(self, agent: str) -> set[str]:
        """Acknowledged messages that should wake ``agent``."""
        with self.lock:
            return {mid for mid, to in self.to.items() if to in WAKES[agent]}


class Delivered:
    """What one waiter received: every message id with when and how (``wait``/``check``)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.got: list[tuple[str, float, str]] = []
        self.ids: set[str] = set()
        self.ready = threading.Event()

    def add(self, mid: str, via: str) -> None:
        at = time.monotonic()
        with self.lock:
            self.got.append((mid, at, via))
            self.ids.add(mid)

    def has(self, wanted: set[str]) -> bool:
        with self.lock:
            return wanted <= self.ids

    def account(self, expected: set[str], acked_at: dict[str, float]) -> dict:
        """Missing, duplicated and unexpected messages, and wake-up latencies (ms) of those sent on A."""
        with self.lock:
            got = list(self.got)
        counts = collections.Counter(mid for mid, _, _ in got)
        latency = [max(0.0, (at - acked_at[mid]) * 1000) for mid, at, via in got if via == "wait" and mid in acked_at]
        return {
            "expected": len(expected),
            "received": len(got),
            "by_wait": sum(1 for _, _, via in got if via == "wait"),
            "by_check": sum(1 for _, _, via in got if via == "check"),
            "missing": len(expected - counts.keys()),
            "duplicated": sum(1 for mid, n in counts.items() if n > 1),
            "unexpected": len(counts.keys() - expected),
            "examples": {
                "missing": sorted(expected - counts.keys())[:5],
                "duplicated": [mid for mid, n in counts.items() if n > 1][:5],
                "unexpected": sorted(counts.keys() - expected)[:5],
            },
            "wake_ms": latency,
        }


class Soak:
    def __init__(
        self,
        base: Path,
        minutes: float,
        *,
        senders: int = 10,
        readers: int = 10,
        subscribers: int = 5,
        sync_every: float = 5.0,
        think_ms: float = 20.0,
        abuse: bool = True,
        sample_every: float = 5.0,
        slow_subscriber: bool = True,
    ):
        self.base, self.minutes = base, minutes
        self.n_senders, self.n_readers, self.n_subs = senders, readers, subscribers
        self.sync_every, self.think, self.abuse, self.sample_every = sync_every, think_ms / 1000, abuse, sample_every
        self.slow_subscriber = slow_subscriber
        self.stop = threading.Event()  # the load ends
        self.finish = threading.Event()  # final syncs done, `expected` set: drain, then end
        self.drain_until = math.inf
        self.rec = Record()
        self.expected: dict[str, set[str]] = {}  # who -> message ids it must have received
        self.mcp, self.cli = Delivered(), Delivered()
        self.subs: list[dict] = [  # one per WebSocket subscriber: what it received
            {
                "creates": collections.Counter(),  # message id -> times (repeated event ids skipped)
                "received": 0,  # message.create notifications, repeats included
                "repeats": 0,  # notifications of an event already seen (a replay overlapping)
                "dropped": 0,  # notifications the daemon said it dropped
                "notices": 0,
                "resumes": 0,
                "replayed": 0,
                "unresumable": 0,
                "ended_resuming": False,  # still in a resume when the drain ended
            }
            for _ in range(subscribers)
        ]
        self.subs_ready = threading.Semaphore(0)
        self.samples: list[dict] = []
        self.notes: collections.Counter = collections.Counter()
        self.abuse_log: collections.Counter = collections.Counter()

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        replicas = make_replicas(self.base, 2)
        self.a, self.b = Replica(replicas.a), Replica(replicas.b)
        for i in range(self.n_senders):
            self.a.call("agent.register", {"name": f"s{i}", "role": "sender", "module": "soak"})
        for name in (MCP_AGENT, CLI_AGENT):
            self.a.call("agent.register", {"name": name, "role": WAITER_ROLE, "module": "soak"})
        # `thrum mcp serve --agent-id waiter` serves an identity of this repository
        identity.write(self.a.paths.identities, identity.Identity(name=MCP_AGENT, role=WAITER_ROLE, module="soak"))
        self.b.call("agent.register", {"name": "remote", "role": "sender", "module": "soak"})
        self.a.call("sync.run")
        self.b.call("sync.run")
        self.a.call("sync.run")

    # ------------------------------------------------------------------ honest clients
    def _write(self, c: Client, params: dict, kind: str = "send") -> None:
        """One send; a timed-out or cut-off send is retried with its key, as a careful client does."""
        params = dict(params, idempotency_key="k_" + os.urandom(12).hex())
        for attempt in range(3):
            t0 = time.perf_counter()
            try:
                result = c.call("message.send", params)
            except (errors.Timeout, errors.Unavailable) as exc:
                self.rec.error(kind, exc)
                if not (exc.data or {}).get("may_have_written") or attempt == 2:
                    return
                continue
            except errors.ThrumError as exc:
                self.rec.error(kind, exc)
                return
            self.rec.ok(kind, time.perf_counter() - t0)
            self.rec.ack(result["message_id"], kind == "send", (params.get("to") or [None])[0])
            return

    def sender(self, i: int) -> None:
        rng = random.Random(i)
        with self.a.client() as c:
            n = 0
            while not self.stop.is_set():
                n += 1
                params = {"caller": f"s{i}", "content": f"soak s{i} #{n} " + "m" * rng.randint(20, 400)}
                if rng.random() < 0.3:
                    params["to"] = [rng.choice(MENTIONS).replace("@s?", f"@s{rng.randrange(self.n_senders)}")]
                self._write(c, params)
                self.stop.wait(rng.uniform(0, 2 * self.think))

    def remote_sender(self) -> None:
        with self.b.client() as c:
            n = 0
            while not self.stop.is_set():
                n += 1
                params = {"caller": "remote", "content": f"from replica b #{n}"}
                if n % 3:  # the waiters hear of these through a sync
                    params["to"] = [f"@{MCP_AGENT}" if n % 3 == 1 else f"@{WAITER_ROLE}"]
                self._write(c, params, "send_b")
                self.stop.wait(1.0)

    def reader(self, i: int) -> None:
        rng = random.Random(100 + i)
        with self.a.client() as c:
            while not self.stop.is_set():
                agent = f"s{rng.randrange(self.n_senders)}"
                kind = rng.choice(["inbox", "unread_mentions", "get", "counts"])
                params: dict = {"caller": agent}
                if kind == "inbox":
                    method = "message.list"
                    params.update(exclude_own=True, page_size=20)
                elif kind == "unread_mentions":
                    method = "message.list"
                    params.update(mentions=True, unread=True, page_size=20)
                elif kind == "get":
                    with self.rec.lock:
                        recent = self.rec.acked_a[-500:]
                    if not recent:
                        self.stop.wait(0.1)
                        continue
                    mid = rng.choice(recent)
                    method, params = "message.get", {"message_id": mid}
                else:
                    method = "message.counts"
                t0 = time.perf_counter()
                try:
                    c.call(method, params)
                    self.rec.ok(f"read:{kind}", time.perf_counter() - t0)
                except errors.ThrumError as exc:
                    self.rec.error(f"read:{kind}", exc)
                self.stop.wait(rng.uniform(0, 2 * self.think))

    def _draining(self, got: Delivered, who: str) -> bool:
        """After the final syncs: True while ``who`` still lacks something and there is time left."""
        if not self.finish.is_set():
            return True
        return not got.has(self.expected[who]) and time.monotonic() < self.drain_until

    def mcp_waiter(self) -> None:
        """A real `thrum mcp serve` for one agent, driven by the official MCP client like a host's
        background listener: wait_for_message in a loop, check_messages now and then."""

        async def tool(session: ClientSession, name: str, args: dict) -> dict | None:
            t0 = time.perf_counter()
            result = await session.call_tool(name, args)
            if result.is_error:
                self.rec.error(f"mcp:{name}", RuntimeError(result.content[0].text if result.content else "?"))
                return None
            if name != "wait_for_message":  # a wait's time is mostly waiting: its wake-ups are measured instead
                self.rec.ok(f"mcp:{name}", time.perf_counter() - t0)
            return result.structured_content

        async def main(errlog) -> None:
            server = StdioServerParameters(
                command=THRUM,
                args=["mcp", "serve", "--repo", str(self.a.paths.main_repo), "--agent-id", MCP_AGENT],
                env={"THRUM_LOG_LEVEL": "WARNING"},
                cwd=str(self.a.paths.main_repo),
            )
            async with stdio_client(server, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    self.mcp.ready.set()
                    checked = time.monotonic()
                    while self._draining(self.mcp, MCP_AGENT):
                        if time.monotonic() - checked >= CHECK_EVERY:
                            checked = time.monotonic()
                            got = await tool(session, "check_messages", {"limit": 100})
                            for m in (got or {}).get("messages") or []:
                                self.mcp.add(m["message_id"], "check")
                            continue
                        got = await tool(session, "wait_for_message", {"timeout": 5})
                        if got and got["status"] == "message_received":
                            self.mcp.add(got["message"]["message_id"], "wait")
                    # anything the waiter never handed out is still unread: a last check returns it
                    got = await tool(session, "check_messages", {"limit": 1000})
                    for m in (got or {}).get("messages") or []:
                        self.mcp.add(m["message_id"], "check")

        try:
            with open(self.base / "mcp-serve.log", "w") as errlog:  # the server's stderr
                anyio.run(main, errlog, backend="asyncio")
        except Exception as exc:  # noqa: BLE001
            self.rec.error("mcp", exc)
        finally:
            self.mcp.ready.set()

    def cli_waiter(self) -> None:
        """What `thrum wait --mentions` does in a loop: message.wait, print, mark read."""
        with self.a.client(timeout=30) as c:
            self.cli.ready.set()
            while self._draining(self.cli, CLI_AGENT):
                try:
                    got = c.call("message.wait", {"caller": CLI_AGENT, "mentions": True, "timeout": 1})
                    if got["messages"]:
                        ids = [m["message_id"] for m in got["messages"]]
                        c.call("message.markRead", {"caller": CLI_AGENT, "message_ids": ids})
                        for mid in ids:
                            self.cli.add(mid, "wait")
                except errors.ThrumError as exc:
                    self.rec.error("cli_wait", exc)

    def syncer(self) -> None:
        while not self.stop.wait(self.sync_every):
            for name, replica in (("sync_a", self.a), ("sync_b", self.b)):
                t0 = time.perf_counter()
                try:
                    replica.call("sync.run")
                    self.rec.ok(name, time.perf_counter() - t0)
                except errors.ThrumError as exc:
                    self.rec.error(name, exc)

    def subscribers(self) -> None:
        """WebSocket subscribers (``all``) that act on drops as docs/realtime.md says: on
        ``notification.dropped``, delete the subscription, subscribe again from the last event
        read *before* the notice, and skip events already seen (by event_id).

        The resume point stays put until the newest resubscription has answered and its replay
        is complete; a notice meanwhile resubscribes from it again (an older resubscription
        still in flight is then deleted when it answers)."""
        from websockets.asyncio.client import connect

        async def one(i: int, state: dict) -> None:
            slow = i == 0 and self.slow_subscriber
            port = self.a.paths.ws_port_file.read_text().strip()
            token = self.a.paths.ws_token_file.read_text().strip()
            seen_events: set[str] = set()
            creates: collections.Counter = state["creates"]
            pending: dict[int, str] = {}  # request id -> what it was
            ids = itertools.count(1)
            sub_id: int | None = None  # the subscription in use
            newest: int | None = None  # request id of the newest subscribe.create not answered yet
            cursor: str | None = None  # every event before it (in the daemon's order) was read
            resuming = False
            replayed_subs: set[int] = set()
            extra: dict = {}
            if slow:  # it reads in bursts; a small receive buffer and queue make its pauses show at once
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SLOW_RCVBUF)
                sock.connect(("127.0.0.1", int(port)))
                sock.setblocking(False)
                extra = {"sock": sock, "max_queue": 1}
            async with connect(
                f"ws://127.0.0.1:{port}/ws",
                additional_headers={"Authorization": f"Bearer {token}"},
                max_size=None,
                ping_interval=None,
                **extra,
            ) as ws:

                async def request(method: str, params: dict) -> int:
                    rid = next(ids)
                    pending[rid] = method
                    await ws.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
                    return rid

                async def handle(msg: dict) -> None:
                    nonlocal sub_id, newest, cursor, resuming
                    method, p = msg.get("method"), msg.get("params") or {}
                    if TRACE and i < 2:  # the slow one and a fast one, to compare orders afterwards
                        result = msg.get("result") if isinstance(msg.get("result"), dict) else {}
                        state.setdefault("trace", []).append(
                            (
                                time.monotonic(),
                                msg.get("id"),
                                method,
                                p.get("event_id"),
                                p.get("message_id"),
                                p.get("subscription_id") or result.get("subscription_id"),
                                p.get("replay"),
                                p.get("seq"),
                                p.get("dropped"),
                                cursor,
                                sub_id,
                                newest,
                                resuming,
                            )
                        )
                    if "id" in msg:  # a reply
                        what = pending.pop(msg["id"], None)
                        if "error" in msg:
                            with self.rec.lock:
                                self.rec.errors["ws"].append(f"{what}: {msg['error']}"[:300])
                        elif what == "subscribe.create":
                            made = msg["result"]["subscription_id"]
                            if msg["id"] != newest:  # superseded by a newer resubscription
                                await request("subscribe.delete", {"subscription_id": made})
                                return
                            newest, sub_id = None, made
                            if not state["resumes"]:
                                self.subs_ready.release()
                            if sub_id in replayed_subs:  # its replay ended before this reply was read
                                resuming = False
                        return
                    if method == "notification.dropped":
                        state["dropped"] += p["dropped"]
                        state["notices"] += 1
                        if cursor is None:  # cannot happen: the soak's first message is read before the load
                            state["unresumable"] += 1
                            return
                        resuming = True
                        state["resumes"] += 1
                        if sub_id is not None:  # first: its live events would crowd the replay out
                            await request("subscribe.delete", {"subscription_id": sub_id})
                            sub_id = None
                        newest = await request("subscribe.create", {"filter_type": "all", "since_event_id": cursor})
                    elif method == "subscription.ended":
                        with self.rec.lock:
                            self.rec.errors["ws"].append(f"subscription ended: {p}"[:300])
                    elif method == "subscription.replayed":
                        replayed_subs.add(p["subscription_id"])
                        if newest is None and p["subscription_id"] == sub_id:
                            resuming = False
                    elif method == "message.create":
                        state["received"] += 1
                        if p["event_id"] in seen_events:
                            state["repeats"] += 1
                            return
                        seen_events.add(p["event_id"])
                        creates[p["message_id"]] += 1
                        state["replayed"] += bool(p.get("replay"))
                        if not resuming and not p.get("replay"):
                            # Only a live event moves the resume point. A replay from the log
                            # comes in event_id order, not in the order the daemon received
                            # events: resuming from the middle of one could skip some, so an
                            # interrupted resume starts again from the same point (docs/realtime.md).
                            cursor = p["event_id"]

                async def pump() -> None:
                    """Read and handle every message, never under a timeout: on Python 3.11 a
                    receive that asyncio.wait_for cancels just as its message arrives can lose
                    that message (the soak once counted three such holes as lost)."""
                    reading_since = time.monotonic()
                    while True:
                        if slow and not self.stop.is_set() and time.monotonic() - reading_since > SLOW_PAUSE[0]:
                            await asyncio.sleep(SLOW_PAUSE[1])
                            reading_since = time.monotonic()
                        await handle(json.loads(await ws.recv()))

                newest = await request("subscribe.create", {"filter_type": "all"})
                reader = asyncio.ensure_future(pump())
                try:
                    while not reader.done():
                        if self.finish.is_set():
                            done = not resuming and self.expected["all"] <= creates.keys()
                            if done or time.monotonic() >= self.drain_until:
                                state["ended_resuming"] = resuming
                                break
                        await asyncio.sleep(0.5)
                    else:
                        reader.result()  # the connection failed: raise why
                finally:
                    reader.cancel()

        async def guarded(i: int, state: dict) -> None:
            try:
                await one(i, state)
            except Exception as exc:  # noqa: BLE001
                self.rec.error("ws", exc)
                self.subs_ready.release()  # do not keep the start waiting for it

        async def main() -> None:
            await asyncio.gather(*(guarded(i, st) for i, st in enumerate(self.subs)))

        asyncio.run(main())

    # ------------------------------------------------------------------ the abusive client
    def abuser(self) -> None:
        attacks = [
            self._slowloris,
            self._pipeline,
            self._huge_line,
            self._unfinished_line,
            self._flood,
            self._ws_unfinished,
        ]
        i = 0
        while not self.stop.is_set():
            attack = attacks[i % len(attacks)]
            i += 1
            try:
                attack()
                self.abuse_log[attack.__name__.strip("_")] += 1
            except OSError:
                self.abuse_log[attack.__name__.strip("_") + " (cut off)"] += 1
            self.stop.wait(1.0)

    def _unix(self) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(str(self.a.paths.socket))
        return s

    def _hold(self, socks: list, seconds: float) -> None:
        self.stop.wait(seconds)
        for s in socks:
            s.close()

    def _slowloris(self) -> None:
        socks = []
        for _ in range(20):
            s = self._unix()
            s.sendall(b'{"jsonrpc":"2.0","id":1,"meth')
            socks.append(s)
        self._hold(socks, 8)

    def _pipeline(self) -> None:
        s = self._unix()
        burst = b"".join(
            b'{"jsonrpc":"2.0","id":%d,"method":"message.list","params":{"page_size":20}}\n' % i for i in range(20_000)
        )
        try:
            s.sendall(burst)  # never reads: the daemon paces it, then cuts it off
        finally:
            s.close()

    def _huge_line(self) -> None:
        s = self._unix()
        try:
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"health","params":{"x":"' + b"x" * (40 << 20) + b'"}}\n')
        finally:
            s.close()

    def _unfinished_line(self) -> None:
        s = self._unix()
        try:
            s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"health","params":{"x":"' + b"x" * (20 << 20))
            self.stop.wait(5)
        finally:
            s.close()

    def _flood(self) -> None:
        socks = []
        try:
            for _ in range(300):
                socks.append(self._unix())
        finally:
            self._hold(socks, 3)

    def _ws_unfinished(self) -> None:
        port = int(self.a.paths.ws_port_file.read_text().strip())
        token = self.a.paths.ws_token_file.read_text().strip()
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            s.sendall(
                (
                    f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                    f"Authorization: Bearer {token}\r\n\r\n"
                ).encode()
            )
            s.recv(4096)
            s.sendall(bytes([0x81, 0xFF]) + (1 << 20).to_bytes(8, "big") + b"\0\0\0\0" + b"[" * 4096)
            self.stop.wait(5)
        finally:
            s.close()

    # ------------------------------------------------------------------ sampling
    def sampler(self) -> None:
        start = time.monotonic()
        while True:
            sample = {"t": round(time.monotonic() - start, 1)}
            for name, replica in (("a", self.a), ("b", self.b)):
                try:
                    st = proc_status(replica.pid)
                    sample[f"rss_{name}"] = round(st["VmRSS"], 1)
                    sample[f"anon_{name}"] = round(st["RssAnon"], 1)
                    sample[f"file_{name}"] = round(st["RssFile"], 1)
                    sample[f"threads_{name}"] = st["Threads"]
                    sample[f"fds_{name}"] = fds(replica.pid)
                except (OSError, KeyError):
                    pass
            with self.rec.lock:
                sample["acked"] = len(self.rec.acked)
            self.samples.append(sample)
            if self.stop.wait(self.sample_every):
                return

    # ------------------------------------------------------------------ run
    def run(self) -> dict:
        self.setup()
        baseline = {"rss_a": rss_mib(self.a.pid), "fds_a": fds(self.a.pid)}
        listeners = [
            threading.Thread(target=fn, name=fn.__name__, daemon=True)
            for fn in (self.subscribers, self.mcp_waiter, self.cli_waiter)
        ]
        for t in listeners:
            t.start()
        self._start_listening()
        threads = [threading.Thread(target=self.sender, args=(i,), name=f"sender{i}") for i in range(self.n_senders)]
        threads += [threading.Thread(target=self.reader, args=(i,), name=f"reader{i}") for i in range(self.n_readers)]
        threads += [
            threading.Thread(target=fn, name=fn.__name__) for fn in (self.remote_sender, self.syncer, self.sampler)
        ]
        if self.abuse:
            threads.append(threading.Thread(target=self.abuser, name="abuser"))
        started = self.started = time.monotonic()
        for t in threads:
            t.daemon = True
            t.start()
        self.stop.wait(self.minutes * 60)
        self.stop.set()
        elapsed = time.monotonic() - started
        for t in threads:
            t.join(120)
        for replica in (self.a, self.b, self.a, self.b):  # settle: every replica has everything
            replica.call("sync.run")
        # now every subscriber and waiter can have everything: let them drain, then end
        with self.rec.lock:
            self.expected["all"] = set(self.rec.acked)
        for who in (MCP_AGENT, CLI_AGENT):
            self.expected[who] = self.rec.expected_for(who)
        self.drain_until = time.monotonic() + DRAIN_S
        self.finish.set()
        drain_started = time.monotonic()
        for t in listeners:
            t.join(DRAIN_S + 60)
        self.notes["drain_s"] = round(time.monotonic() - drain_started, 1)
        for replica in (self.a, self.b, self.a, self.b):  # the waiters' read marks too
            replica.call("sync.run")
        st = proc_status(self.a.pid)
        self.samples.append(
            {
                "t": round(time.monotonic() - started, 1),
                "rss_a": round(st["VmRSS"], 1),
                "anon_a": round(st["RssAnon"], 1),
                "file_a": round(st["RssFile"], 1),
                "threads_a": st["Threads"],
                "fds_a": fds(self.a.pid),
                "rss_b": round(rss_mib(self.b.pid), 1),
                "fds_b": fds(self.b.pid),
                "acked": len(self.rec.acked),
            }
        )
        return self.check(elapsed, baseline)

    def _start_listening(self, timeout: float = 60.0) -> None:
        """Wait until the subscribers and waiters listen, then send a first message and wait
        until every subscriber has read it (so each has a resume point before the load starts)."""
        deadline = time.monotonic() + timeout
        for _ in range(self.n_subs):
            if not self.subs_ready.acquire(timeout=max(0.1, deadline - time.monotonic())):
                raise RuntimeError("the WebSocket subscribers did not subscribe")
        for who in (self.mcp, self.cli):
            if not who.ready.wait(max(0.1, deadline - time.monotonic())):
                raise RuntimeError("a waiter did not start")
        if self.rec.errors:
            raise RuntimeError(f"listeners failed to start: {dict(self.rec.errors)}")
        mid = self.a.call("message.send", {"caller": "s0", "content": "soak: start"})["message_id"]
        self.rec.ack(mid, True)
        while not all(mid in st["creates"] for st in self.subs):
            if time.monotonic() > deadline:
                raise RuntimeError("a WebSocket subscriber never received the first message")
            time.sleep(0.05)

    def check(self, elapsed: float, baseline: dict) -> dict:
        acked = list(self.rec.acked)
        shards_a, shards_b = self.a.shards(), self.b.shards()
        identical = shards_a == shards_b
        exactly_once = {}
        visible = {}
        for name, replica in (("a", self.a), ("b", self.b)):
            counts = replica.create_counts()
            wrong = {m: counts[m] for m in acked if counts[m] != 1}
            exactly_once[name] = {
                "missing_or_duplicated": len(wrong),
                "extra": sum(counts.values()) - len(acked),
                "examples": dict(list(wrong.items())[:5]),
            }
            visible[name] = replica.call("message.list", {"page_size": 1})["total"]
        honest_errors = {k: len(v) for k, v in self.rec.errors.items()}
        expected = self.expected["all"]
        subscribers = [
            {
                "received": st["received"],
                "distinct": len(st["creates"]),
                "repeats": st["repeats"],
                "dropped": st["dropped"],
                "notices": st["notices"],
                "resumes": st["resumes"],
                "replayed": st["replayed"],
                "unresumable": st["unresumable"],
                "lost_after_resume": len(expected - st["creates"].keys()),
                "lost_sent_at_s": _span(
                    [
                        self.rec.acked_at[m] - self.started
                        for m in expected - st["creates"].keys()
                        if m in self.rec.acked_at
                    ]
                ),
                "ended_resuming": st["ended_resuming"],
                "lost_examples": [
                    (mid, "a" if mid in self.rec.acked_at else "b")
                    for mid in sorted(expected - st["creates"].keys())[:5]
                ],
                "twice": sum(1 for n in st["creates"].values() if n > 1),
                "unexpected": len(st["creates"].keys() - expected),
            }
            for st in self.subs
        ]
        if TRACE:
            lost = sorted(expected - self.subs[0]["creates"].keys())
            with open(TRACE, "w") as f:
                json.dump({"traces": [st.get("trace", []) for st in self.subs[:2]], "lost": lost}, f)
        waiters = {}
        for who, got in ((MCP_AGENT, self.mcp), (CLI_AGENT, self.cli)):
            waiters[who] = got.account(self.expected[who], self.rec.acked_at)
            wake = waiters[who].pop("wake_ms")
            if wake:
                self.rec.latency[f"wake:{who}"] = wake
        log_file = self.base / "mcp-serve.log"
        server_log = log_file.read_text(errors="replace") if log_file.exists() else ""
        waiters[MCP_AGENT]["told_of_drops"] = server_log.count("the daemon dropped")
        waiters[MCP_AGENT]["log_tail"] = server_log[-2000:]
        rss = [s["rss_a"] for s in self.samples if "rss_a" in s]
        anon = [s["anon_a"] for s in self.samples if "anon_a" in s]
        minute = max(1, int(60 / self.sample_every))
        middle = anon[max(0, len(anon) // 2 - minute // 2) : len(anon) // 2 + minute // 2 + 1]
        return {
            "minutes": round(elapsed / 60, 2),
            "load_average": os.getloadavg(),
            "sends": len(acked),
            "sends_per_s": round(len(acked) / elapsed, 1),
            "reads": sum(len(v) for k, v in self.rec.latency.items() if k.startswith("read:")),
            "latency_ms": {
                k: {
                    "n": len(v),
                    "p50": round(pct(v, 50), 2),
                    "p95": round(pct(v, 95), 2),
                    "p99": round(pct(v, 99), 2),
                    "max": round(max(v), 2),
                }
                for k, v in sorted(self.rec.latency.items())
            },
            "errors": honest_errors,
            "error_examples": {k: v[:3] for k, v in self.rec.errors.items()},
            "notes": dict(self.notes),
            "abuse": dict(self.abuse_log),
            "baseline": baseline,
            "samples": self.samples,
            "rss_first_minute_mib": round(statistics.median(rss[:minute]), 1) if rss else None,
            "rss_last_minute_mib": round(statistics.median(rss[-minute:]), 1) if rss else None,
            "rss_max_mib": max(rss) if rss else None,
            "anon_first_minute_mib": round(statistics.median(anon[:minute]), 1) if anon else None,
            "anon_last_minute_mib": round(statistics.median(anon[-minute:]), 1) if anon else None,
            "anon_max_mib": max(anon) if anon else None,
            # after the warm-up (bounded caches fill in the first minutes): the middle minute vs the last
            "anon_middle_minute_mib": round(statistics.median(middle), 1) if middle else None,
            "fds_max": max(s.get("fds_a", 0) for s in self.samples),
            "logs_identical": identical,
            "exactly_once": exactly_once,
            "visible": visible,
            "subscribers": subscribers,
            "slow_subscriber": self.slow_subscriber,
            "waiters": waiters,
            "daemon_a": self.a.call("daemon.status").get("clients"),
        }

    def close(self) -> None:
        for replica in (getattr(self, "a", None), getattr(self, "b", None)):
            if replica is not None:
                try:
                    replica.stop()
                except Exception:  # noqa: BLE001
                    pass


def run(minutes: float, **kw) -> dict:
    base = Path(tempfile.mkdtemp(prefix="thrum-soak-"))
    soak = Soak(base, minutes, **kw)
    try:
        return soak.run()
    finally:
        soak.close()
        if os.environ.get("THRUM_SOAK_KEEP"):
            print(f"kept {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)


def table(r: dict) -> list[tuple[str, str, str]]:
    rows = [
        ("duration", f"{r['minutes']:.1f} min", ""),
        ("machine load average (1/5/15 min)", " / ".join(f"{x:.1f}" for x in r["load_average"]), ""),
        ("acknowledged sends", f"{r['sends']}", ""),
        ("send throughput", f"{r['sends_per_s']:.1f}/s", ""),
        ("reads", f"{r['reads']}", ""),
    ]
    for kind, lat in r["latency_ms"].items():
        rows.append(
            (
                f"{kind} latency p50 / p99 / max",
                f"{lat['p50']:.1f} / {lat['p99']:.1f} / {lat['max']:.0f} ms",
                f"n={lat['n']}",
            )
        )
    rows.append(("honest client errors", f"{sum(r['errors'].values())}", "0"))
    rows.append(
        ("RSS A first / last minute (median)", f"{r['rss_first_minute_mib']} / {r['rss_last_minute_mib']} MiB", "")
    )
    rows.append(
        (
            "  of which anonymous (the daemon's own)",
            f"{r['anon_first_minute_mib']} / {r['anon_last_minute_mib']} MiB",
            "",
        )
    )
    rows.append(
        (
            "anonymous, middle / last minute (warmed up)",
            f"{r['anon_middle_minute_mib']} / {r['anon_last_minute_mib']} MiB",
            "flat",
        )
    )
    rows.append(("RSS A max (anonymous max)", f"{r['rss_max_mib']} ({r['anon_max_mib']}) MiB", ""))
    rows.append(("descriptors A max", f"{r['fds_max']}", "flat"))
    subs = r["subscribers"]
    rows.append(
        (
            f"WebSocket message.create received / dropped, announced ({len(subs)} subscribers)",
            f"{sum(x['received'] for x in subs)} / {sum(x['dropped'] for x in subs)}",
            "",
        )
    )
    if r.get("slow_subscriber") and subs:
        rows.append(
            (
                f"  dropped for the slow one (reads {SLOW_PAUSE[0]:g} s, pauses {SLOW_PAUSE[1]:g} s) / the others",
                f"{subs[0]['dropped']} / {sum(x['dropped'] for x in subs[1:])}",
                "",
            )
        )
    rows.append(
        (
            "  drop notices / resumes (since_event_id) / replayed / repeats skipped",
            f"{sum(x['notices'] for x in subs)} / {sum(x['resumes'] for x in subs)} / "
            f"{sum(x['replayed'] for x in subs)} / {sum(x['repeats'] for x in subs)}",
            "",
        )
    )
    rows.append(
        (
            "  lost after resume, twice, unexpected (all subscribers)",
            f"{sum(x['lost_after_resume'] for x in subs)}, {sum(x['twice'] for x in subs)}, "
            f"{sum(x['unexpected'] for x in subs)}",
            "0, 0, 0",
        )
    )
    for i, x in enumerate(subs):
        if x["lost_after_resume"]:
            rows.append(
                (
                    f"    subscriber {i}: lost ones were sent at (from the start); still resuming at the end",
                    f"{x['lost_sent_at_s'] or 'on B'}; {'yes' if x['ended_resuming'] else 'no'}",
                    "",
                )
            )
    for who, label in ((MCP_AGENT, "MCP waiter (thrum mcp serve)"), (CLI_AGENT, "CLI waiter (message.wait)")):
        w = r["waiters"][who]
        got = f"{w['by_wait']} + {w['by_check']}" if who == MCP_AGENT else f"{w['by_wait']}"
        rows.append((f"{label}: messages for it / received", f"{w['expected']} / {got}", ""))
        rows.append(
            (
                "  missing, duplicated, unexpected",
                f"{w['missing']}, {w['duplicated']}, {w['unexpected']}",
                "0, 0, 0",
            )
        )
    rows.append(("  MCP server told of drops", f"{r['waiters'][MCP_AGENT]['told_of_drops']}", ""))
    rows.append(("logs byte-identical (A, B)", str(r["logs_identical"]), "True"))
    for name, once in r["exactly_once"].items():
        rows.append(
            (f"acked missing/duplicated, extra ({name})", f"{once['missing_or_duplicated']}, {once['extra']}", "0, 0")
        )
    rows.append(("visible in views (A, B)", f"{r['visible']['a']}, {r['visible']['b']}", f"{r['sends']}"))
    return rows


def print_result(r: dict) -> None:
    rows = table(r)
    print_table(rows, title=f"\nsoak ({r['minutes']:.1f} min)", head=("metric", "value"), indent="  ")
    print("\n  abusive client, attacks made:", ", ".join(f"{k} {v}" for k, v in sorted(r["abuse"].items())))
    print("\n  RSS (MiB) and descriptors of A over time:")
    step = max(1, len(r["samples"]) // 20)
    shown = r["samples"][::step]
    if shown[-1] is not r["samples"][-1]:
        shown.append(r["samples"][-1])
    for s in shown:
        print(
            f"    t={s['t']:>6.0f}s  rss={s.get('rss_a', float('nan')):>7.1f}  "
            f"anon={s.get('anon_a', float('nan')):>7.1f}  file={s.get('file_a', float('nan')):>7.1f}  "
            f"threads={s.get('threads_a', 0):>3}  fds={s.get('fds_a', 0):>4}  acked={s['acked']}"
        )
    if r["errors"]:
        print("\n  errors:", json.dumps(r["error_examples"], indent=2)[:3000])


def section(args) -> dict:
    """Entry point for scripts/bench.py (uses --minutes)."""
    result = run(
        getattr(args, "minutes", 10.0),
        abuse=not getattr(args, "no_abuse", False),
        sync_every=getattr(args, "sync_every", 5.0),
        subscribers=getattr(args, "subscribers", 5),
        slow_subscriber=not getattr(args, "no_slow_subscriber", False),
    )
    print_result(result)
    out = getattr(args, "soak_json", None)
    if out:
        Path(out).write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--json", dest="soak_json", help="also write the full result (with every sample) here")
    ap.add_argument("--no-abuse", action="store_true", help="leave the abusive client out (to compare)")
    ap.add_argument("--sync-every", type=float, default=5.0, help="seconds between syncs (default 5)")
    ap.add_argument("--subscribers", type=int, default=5, help="WebSocket subscribers (default 5)")
    ap.add_argument(
        "--no-slow-subscriber", action="store_true", help="every subscriber reads at once (none pauses to overflow)"
    )
    args = ap.parse_args(argv)
    section(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
