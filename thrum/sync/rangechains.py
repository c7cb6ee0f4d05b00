"""The chains a pushed range extends, as `thrum verify` reads them from git (issue 25, item 7).

`thrum.trust.chains.range_faults` says what a range of added events does to its writers'
chains, given the events of those writers held before. This module finds those events in
a commit's tree, reading as little as it can (rule 5 of `thrum.sync.verifyrange`):

1. The OLD versions of the changed files are read already; of each only each writer's
   newest link counts (a writer's chain follows the order it appends in), and a file of
   an agent's own stream holds only that agent's lines.
2. Then the newest segments of each writer's own streams and of the shared ``events``
   stream, back to the first one holding a line of the writer: an honest push, which
   appends to each writer's newest segments, reads nothing more.
3. Every line of a writer only when that is not enough (`chains.unsure_signers`: an
   added position at or below its newest one: a fork, or a hole filled).
4. Lines are read without the full normaliser: the link is all that is needed, and a
   line that does not parse holds no position.
"""

from __future__ import annotations

from typing import Any

from .. import safejson
from ..events.layout import AGENT_KINDS_OF_STREAMS, EVENTS_STREAM, is_log_path, segment_number, shard_owner
from ..trust.chains import Link, RangeFault, link_of, range_faults, unsure_signers
from .gitstore.api import GitStore, Kind, Oid
from .trees import MAX_FILE_BYTES, REGULAR as REGULAR_MODES, TREE as TREE_MODE, LayoutTrees, Leaf

__all__ = ["Blobs", "chain_faults"]


class Blobs:
    """Log files' lines, each blob read once (a file of OLD and NEW may be the same blob)."""

    def __init__(self, store: GitStore):
        self.store = store
        self._cache: dict[Oid, list[bytes]] = {}

    def lines(self, oid: Oid) -> list[bytes]:
        found = self._cache.get(oid)
        if found is None:
            header = self.store.header(oid)
            is_blob = header is not None and header[0] == Kind.BLOB and header[1] <= MAX_FILE_BYTES
            data = self.store.read(oid)[1] if is_blob else b""
            found = list(filter(None, data.split(b"\n")))
            self._cache[oid] = found
        return found


def chain_faults(
    blobs: Blobs,
    trees: LayoutTrees,
    tree: Oid | None,
    accepted: list[tuple[str, dict[str, Any]]],
    before: dict[str, list[bytes]],
) -> list[RangeFault]:
    """Forks, broken links and gaps the accepted added lines make in their signers' chains.

    What the signers held before: the OLD versions of the changed files, and the newest
    lines of each signer's streams in NEW (its own ``messages``/``receipts`` streams and
    the shared ``events`` stream, read from the newest segment back until a line of the
    signer turns up); every line of a signer only when that is not enough
    (`chains.unsure_signers`: a position at or below its newest, rare for honest pushes).
    """
    added = [ln for _, d in accepted if "chain" in d and (ln := link_of(d)) is not None]
    if not added or tree is None:
        return []
    signers = {ln.signer for ln in added}
    mine = {ln.hash for ln in added}
    known = {path: _links(lines, _of(path, signers), mine, newest=True) for path, lines in before.items()}
    held: list[Link] = [ln for links in known.values() for ln in links]  # the changed files' OLD versions
    wanted = [EVENTS_STREAM] + [f"{k}/{s}" for s in sorted(signers) for k in AGENT_KINDS_OF_STREAMS]
    streams = {stream: _segments(trees, tree, stream) for stream in wanted}
    for signer in signers:
        for kind in AGENT_KINDS_OF_STREAMS:
            held += _tail(blobs, streams.get(f"{kind}/{signer}", []), known, {signer}, mine)
    held += _tail(blobs, streams.get(EVENTS_STREAM, []), known, signers, mine)
    changed = set(before)
    unsure = unsure_signers(added, held)
    if unsure:  # every line of those signers
        for stream in [EVENTS_STREAM] + [f"{k}/{s}" for s in sorted(unsure) for k in AGENT_KINDS_OF_STREAMS]:
            for path, leaf in streams.get(stream, []):
                lines = before[path] if path in changed else blobs.lines(leaf.oid)
                held += _links(lines, unsure, mine)
    return range_faults(added, held)


def _of(path: str, signers: set[str]) -> set[str]:
    """The signers whose lines a log file may hold: its agent's alone, or any in ``events``."""
    owner = shard_owner(path) if is_log_path(path) else None
    return signers & {owner} if owner is not None else signers


def _segments(trees: LayoutTrees, tree: Oid, stream: str) -> list[tuple[str, Leaf]]:
    """A stream's regular segment files in ``tree``, oldest first (only its directories are read)."""
    oid: Oid | None = tree
    for part in stream.split("/"):
        entry = trees.entries(oid).get(part.encode())
        if entry is None or entry[0] != TREE_MODE:
            return []
        oid = Oid(entry[1])
    found = []
    for name, (mode, raw) in trees.entries(oid).items():
        n = segment_number(name.decode("ascii", "replace"))
        if n is not None and mode in REGULAR_MODES:
            found.append((n, f"{stream}/{name.decode('ascii')}", Leaf(Oid(raw), mode)))
    return [(path, leaf) for _, path, leaf in sorted(found, key=lambda x: x[0])]


def _tail(
    blobs: Blobs,
    segments: list[tuple[str, Leaf]],
    known: dict[str, list[Link]],
    signers: set[str],
    mine: set[str],
) -> list[Link]:
    """The links of ``signers`` in the newest segments of a stream, back to the first
    segment holding a line of each. A changed file's OLD version was read already
    (``known``): its links are not returned again, but they count as found, so an honest
    push, which appends to each writer's newest segments, reads nothing more here."""
    out: list[Link] = []
    todo = set(signers)
    for path, leaf in reversed(segments):
        if not todo:
            break
        if path in known:
            found = [ln for ln in known[path] if ln.signer in todo]
        else:
            found = _links(blobs.lines(leaf.oid), todo, mine, newest=True)
            out += found
        todo -= {ln.signer for ln in found}
    return out


def _links(lines: list[bytes], signers: set[str], skip: set[str], *, newest: bool = False) -> list[Link]:
    """The chain links of ``signers``' lines (read without the full normaliser: the link is
    all that is needed, and a line that does not parse holds no position). ``newest``:
    only each signer's last one in the file (its highest position there: a writer's
    chain follows the order it appends in), read from the end."""
    out = []
    todo = set(signers)
    for line in reversed(lines) if newest else lines:
        if newest and not todo:
            break
        if b'"chain"' not in line:
            continue
        try:
            d = safejson.loads(line)
        except ValueError:
            continue
        if (
            not isinstance(d, dict)
            or not isinstance(d.get("chain"), dict)
            or not isinstance(d["chain"].get("seq"), int)
        ):
            continue
        sig = d.get("sig")
        if not isinstance(sig, dict) or sig.get("by") not in signers:
            continue
        try:
            ln = link_of(d)
        except (TypeError, ValueError):
            continue
        if ln is None or ln.hash in skip:
            continue
        if newest:
            if ln.signer not in todo:
                continue
            todo.discard(ln.signer)
        out.append(ln)
    return out
