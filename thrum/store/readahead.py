"""Reading a whole log ahead of its fold: the batches a rebuild folds, and where they are made.

A rebuild's load is read + decode, then trust check + fold, batch after batch. The
batches are the same wherever they are made (`log_batches`: whole lines, at most
about ``batch_events`` events or ``batch_bytes`` of the log, the shards in the log's
order), so the fold judges and applies the same lines in the same order whichever
reader made them:

- `log_batches` itself, in the folding thread, in turn with the fold (the daemon's
  catch-ups and small rebuilds).
- `ReaderThread`: a thread reads and decodes batch N+1 (and, given a ``judge``, has the
  trust check judge it: `verified.VerifiedFold.judge_ahead`) while batch N is folded.
  Both threads hold the GIL for their Python, but SQLite lets go of it inside each
  statement step and each commit, about half of the fold's time: the reader's Python
  runs then, on the second core. Batches are read, judged and folded in the log's order,
  one after another; only the reading and judging of the next overlaps the fold of the
  one before. Two batches are alive at once (the one folded, the one made), so a rebuild
  reading ahead makes them half as large.

A reader process handing over msgpack was measured too, and lost: decoding its frames
cost the folder ~40 % of decoding the lines, and the whole ~20 % more CPU, for no better
wall time (docs/design/decisions.md, "Rebuilds on a large history").

A reader that fails (an unreadable file, an exception in the thread) makes the
iteration raise `ReaderFailed` with its reason: the rebuild stops there and its
database gets no schema version, so it is neither used nor swapped in.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .log import EventLog, Position, ReadResult

__all__ = ["Batch", "ReaderFailed", "ReaderThread", "log_batches"]


class ReaderFailed(RuntimeError):
    """The reader of a rebuild's log stopped before the end (the reason is in the message)."""


@dataclass
class Batch:
    """Lines to fold together, and how many bytes of the log had been read with them
    (of the shards' sizes when the reader was asked to count them, for progress)."""

    result: ReadResult
    read: int = 0
    judged: Any = None  # the batch judged ahead of its fold (`ReaderThread`'s ``judge``), if it was


def log_batches(
    event_log: EventLog,
    positions: dict[str, Position],
    *,
    batch_events: int,
    batch_bytes: int,
    chunk: int,
    sized: bool = False,
) -> Iterator[Batch]:
    """The log beyond ``positions`` in batches: each ends after about ``batch_events`` events
    or ``batch_bytes`` bytes of the log, whichever comes first; shards are read ``chunk``
    bytes at a time. The last batch (possibly empty) holds what is left; ``sized``: count
    the bytes read against the shards' sizes (`Batch.read`)."""
    pending = ReadResult()
    done = 0  # bytes of the shards read to their end
    size = 0  # bytes of the log read into ``pending``
    for shard in event_log.shards():
        pos = positions.get(shard, Position())
        while True:
            before = len(pending.records)
            at_end = event_log.read_shard(shard, pos, pending, max_bytes=chunk)
            new_pos = pending.positions.get(shard, pos)
            size += max(0, new_pos.offset - pos.offset)
            if len(pending.records) >= batch_events or size >= batch_bytes:
                yield Batch(pending, done + new_pos.offset)
                pending, size = ReadResult(), 0
            if at_end or (new_pos == pos and len(pending.records) == before):
                break
            pos = new_pos
        done += _size(event_log, shard) if sized else 0
    yield Batch(pending, done)


def _size(event_log: EventLog, shard: str) -> int:
    try:
        return event_log.path(shard).stat().st_size
    except OSError:
        return 0


class ReaderThread:
    """`log_batches` of a whole log, each batch made by a thread of its own while the one
    before it is folded (see the module docstring). `start` it, then iterate it once
    inside ``with``, which stops the thread however the fold ends."""

    def __init__(
        self,
        event_log: EventLog,
        *,
        batch_events: int,
        batch_bytes: int,
        chunk: int,
        sized: bool,
        judge: Callable[[list[tuple[str, dict[str, Any]]], list[bytes]], Any] | None = None,
    ):
        self._source = log_batches(
            event_log, {}, batch_events=batch_events, batch_bytes=batch_bytes, chunk=chunk, sized=sized
        )
        self._judge = judge  # judges each batch after reading it (`Batch.judged`), in this thread
        self._wanted = threading.Semaphore(0)  # batches the fold asked for
        self._ready: queue.SimpleQueue[Batch | BaseException | None] = queue.SimpleQueue()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="thrum-log-reader", daemon=True)

    def start(self) -> ReaderThread:
        self._wanted.release()  # the first batch
        self._thread.start()
        return self

    def __enter__(self) -> ReaderThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._wanted.release()  # a reader waiting to be asked sees the stop
        self._thread.join()  # at most the batch it is making

    def _run(self) -> None:
        try:
            while True:
                self._wanted.acquire()
                if self._stop:
                    return
                batch = next(self._source, None)
                if batch is not None and self._judge is not None and batch.result.records:
                    batch.judged = self._judge(batch.result.records, batch.result.lines)
                self._ready.put(batch)
                if batch is None:
                    return
                del batch  # only the fold holds it now
        except BaseException as exc:  # noqa: BLE001 - handed to the folding thread, which raises it
            self._ready.put(exc)

    def __iter__(self) -> Iterator[Batch]:
        while True:
            item = self._ready.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise ReaderFailed(f"the log reader stopped before the end of the log: {item}") from item
            self._wanted.release()  # the next batch, made while this one is folded
            yield item
            del item  # not kept while the next one is waited for
