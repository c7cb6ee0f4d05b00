"""The per-shard merge: pure bytes in, bytes out (no pygit2, no trio, no I/O).

A shard is a JSONL file: one event per line. Rules:

1. A line's key is its ``event_id`` when the line is a valid JSON object whose
   ``event_id`` is a string; otherwise the key is the line itself, stripped of
   surrounding whitespace. Malformed lines (a torn write, garbage someone pushed)
   are therefore kept and deduplicated like any other line, never dropped.
2. The merged shard is the remote's lines in the remote's order, then the local
   lines whose key the remote lacks, in local order. A key that was already
   written is skipped (first occurrence wins), so the output has unique keys.
3. Blank lines are dropped; every output line ends with ``\\n`` (a torn last line
   without a newline is kept and terminated).
4. The result depends only on the two inputs. Because the remote comes first and
   every replica merges against the same remote, replicas that have seen the same
   events end up with byte-identical shards once each has merged with that remote.

``received`` are the lines new to the local side (to fold into the projection),
``sent`` the local lines the remote lacked (what our push adds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["MergeResult", "event_key", "merge_shard", "split_lines"]


@dataclass(frozen=True)
class MergeResult:
    """Outcome of merging one shard. Lines in ``received``/``sent`` end with ``\\n``."""

    data: bytes
    received: list[bytes]
    sent: list[bytes]


def event_key(line: bytes) -> bytes:
    """The dedup key of one line: its ``event_id`` (UTF-8) or the stripped line."""
    stripped = line.strip()
    if not stripped.startswith(b"{"):
        return stripped
    try:
        obj = json.loads(stripped)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return stripped
    if isinstance(obj, dict):
        event_id = obj.get("event_id")
        if isinstance(event_id, str):
            return event_id.encode("utf-8", "surrogatepass")
    return stripped


def split_lines(data: bytes) -> list[bytes]:
    """Non-blank lines of ``data`` without their ``\\n`` (a torn last line included)."""
    return [line for line in data.split(b"\n") if line.strip()]


def merge_shard(remote: bytes, local: bytes) -> MergeResult:
    """Merge the local bytes of one shard into the remote's (see the module rules)."""
    remote_lines = split_lines(remote)
    local_lines = split_lines(local)

    memo: dict[bytes, bytes] = {}  # a line present on both sides is parsed once

    def key(line: bytes) -> bytes:
        k = memo.get(line)
        if k is None:
            k = memo[line] = event_key(line)
        return k

    local_keys = {key(line) for line in local_lines}
    written: set[bytes] = set()
    out: list[bytes] = []
    received: list[bytes] = []
    for line in remote_lines:
        k = key(line)
        if k in written:
            continue
        written.add(k)
        out.append(line + b"\n")
        if k not in local_keys:
            received.append(line + b"\n")

    sent: list[bytes] = []
    for line in local_lines:
        k = key(line)
        if k in written:
            continue
        written.add(k)
        sent.append(line + b"\n")
    out.extend(sent)
    return MergeResult(data=b"".join(out), received=received, sent=sent)
