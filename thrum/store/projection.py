"""The SQLite projection of the log: its rules, and the functions the daemon and the sync call.

Rules (tested as properties in tests/store/test_projection_properties.py):

1. Idempotent: an event is applied at most once (``applied_events`` by event_id;
   a winning message.create is known by the ``messages`` row it wrote).
2. Order-independent: any arrival order of the same events gives the same state.
   Edits and deletes that arrive before their message are stored and take effect
   when it arrives; concurrent edits resolve last-writer-wins by event_id; the
   first delete (by event_id) is final and edits after it are ignored; of two
   creates for one message_id the lowest event_id wins. Read state is
   last-writer-wins per (agent, message); archive marks are final. Every
   handler is idempotent on its own as well (all comparisons are strict), so
   ``applied_events`` is an optimisation and the source of "what is new", not
   what keeps state correct.
3. Untrusted input: a shard only carries its own agent's events
   (`events.allowed_in_shard`); only a message's author edits or deletes it.
   Violations are skipped, counted and recorded in ``fold_issues``; nothing
   is deleted from the log.
4. A batch is folded in one transaction, grouped by type in a fixed order; each
   handler works on sets of rows, which is what makes a rebuild fast.
5. Derived tables (mention sets, counters) are kept by triggers on every change
   (`counters.COUNTER_TRIGGERS`); a rebuild loads without them and computes them once.

`rebuild` and `catch_up` give identical query results for the same log.

Known limit: two *different* events that share an event_id (only a hostile
writer makes those) are resolved by arrival order.

Where each part lives: `thrum.store.fold` (the transaction, the handler order),
`thrum.store.message_fold` (the message lifecycle and the read, unread and
archive marks), `thrum.store.directory_fold` (agents, sessions, groups,
threads), `thrum.store.rebuild`
(catch up, rebuild, open at start-up), `thrum.store.counters` (the counter
tables, their triggers and their verification), `thrum.store.database` and
`thrum.store.models` (opening the file, the schema). This module names the
entry points callers use, so they need not know that layout.
"""

from __future__ import annotations

from .counters import verify_counters
from .directory import fold_counts
from .fold import FoldResult, applied_since, fold, load_positions, save_positions
from .rebuild import (
    READ_CHUNK,
    REBUILD_BATCH,
    FoldFn,
    Opened,
    Progress,
    catch_up,
    collector_paused,
    open_outdated,
    open_projection,
    rebuild,
)

__all__ = [
    "FoldFn",
    "FoldResult",
    "Opened",
    "Progress",
    "READ_CHUNK",
    "REBUILD_BATCH",
    "applied_since",
    "catch_up",
    "collector_paused",
    "fold",
    "fold_counts",
    "load_positions",
    "open_outdated",
    "open_projection",
    "rebuild",
    "save_positions",
    "verify_counters",
]
