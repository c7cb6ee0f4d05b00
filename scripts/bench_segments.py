"""Writing benchmark histories straight into a worktree, as the daemon would have.

The benchmarks generate millions of lines without the daemon; this appends them the
way `thrum.store.log.EventLog` does: to the highest segment of each stream until it
reaches the cap, then to the next one (``{stream}/{n:06d}.jsonl``). With a `Signing`,
lines are signed by their authors (whose keys become identities of one machine, so
its daemon can act for them) and each segment gets the seals the daemon writes
before a commit (docs/design/trust.md): a replica verifies one signature per seal.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from thrum import events as ev  # noqa: E402
from thrum import identity  # noqa: E402
from thrum.store.log import SEGMENT_CAP  # noqa: E402
from thrum.trust.chains import sig_hash  # noqa: E402
from thrum.trust import signing  # noqa: E402
from thrum.trust.keys import LocalKeys  # noqa: E402


class Signing:
    """Agents with keys (identities of one machine) and their signatures."""

    def __init__(self, identities_dir: Path):
        self.dir = Path(identities_dir)
        self.keys = LocalKeys(self.dir)
        self.pairs: dict = {}
        self.chains = True  # every event in its author's chain, as the daemon writes them (issue 25)
        self._tips: dict[str, tuple[int, str]] = {}

    def agent(self, name: str, role: str, module: str = "core") -> dict:
        """Make ``name`` an identity with a key; its signed ``agent.register`` event."""
        self.pairs[name] = self.keys.create(name)
        identity.write(self.dir, identity.Identity(name=name, role=role, module=module))
        reg = ev.AgentRegister(
            agent_id=name, name=name, role=role, module=module, public_key=self.pairs[name][1].b64
        ).to_dict()
        return self.sign(reg)

    def sign(self, d: dict) -> dict:
        """``d`` signed by its author, a link of the author's chain as the daemon writes it
        (trust/chains.py): callers sign each author's events in the order they are appended."""
        author = ev.event_author(d) or ""
        if self.chains:
            seq, prev = self._tips.get(author, (0, ""))
            d = {**d, "chain": {"seq": seq + 1, "prev": prev} if seq else {"seq": 1}}
        out = signing.sign(d, author, self.pairs[author][0])
        if self.chains:
            self._tips[author] = (seq + 1, sig_hash(signing.signature_of(out)[1]))
        return out

    def message_id(self, author: str) -> str:
        return signing.new_message_id(self.pairs[author][1].tag)

    def seal(self, signer: str, hashes: list[str]) -> bytes:
        return ev.encode_line(signing.make_seal(signer, hashes, self.pairs[signer][0]))


class SegmentWriter:
    """Appends raw lines (each ending with a newline) to streams under ``root``; with
    ``signing``, seals each segment's lines per signer when it is left or closed."""

    def __init__(self, root: Path, cap: int = SEGMENT_CAP, signing: Signing | None = None):
        self.root = Path(root)
        self.cap = cap
        self.signing = signing
        self._tails: dict[str, list] = {}  # stream -> [number, size, open file or None]
        self._unsealed: dict[str, dict[str, list[str]]] = {}  # stream -> signer -> line hashes

    def _tail(self, stream: str) -> list:
        tail = self._tails.get(stream)
        if tail is None:
            folder = self.root / stream
            numbers = [ev.segment_number(n) for n in os.listdir(folder)] if folder.is_dir() else []
            n = max((x for x in numbers if x is not None), default=1)
            path = self.root / ev.segment_path(stream, n)
            tail = self._tails[stream] = [n, path.stat().st_size if path.exists() else 0, None]
        return tail

    def append(self, stream: str, lines: list[bytes], signer: str | None = None) -> None:
        """Append ``lines`` (signed by ``signer``, or by each line's ``sig.by``)."""
        tail = self._tail(stream)
        chunk: list[bytes] = []
        for line in lines:
            if tail[1] and tail[1] + len(line) > self.cap:
                self._write(stream, tail, chunk)
                self._seal(stream, tail)
                chunk = []
                tail[0], tail[1] = tail[0] + 1, 0
                if tail[2] is not None:
                    tail[2].close()
                    tail[2] = None
            chunk.append(line)
            tail[1] += len(line)
            if self.signing is not None:
                by = signer or orjson.loads(line)["sig"]["by"]
                self._unsealed.setdefault(stream, {}).setdefault(by, []).append(signing.line_hash(line))
        self._write(stream, tail, chunk)

    def _seal(self, stream: str, tail: list) -> None:
        groups = self._unsealed.pop(stream, {})
        seals = [self.signing.seal(by, hashes) for by, hashes in sorted(groups.items())] if groups else []
        self._write(stream, tail, seals)

    def _write(self, stream: str, tail: list, chunk: list[bytes]) -> None:
        if not chunk:
            return
        if tail[2] is None:
            path = self.root / ev.segment_path(stream, tail[0])
            path.parent.mkdir(parents=True, exist_ok=True)
            tail[2] = open(path, "ab")
        tail[2].write(b"".join(chunk))

    def close(self) -> None:
        for stream, tail in self._tails.items():
            self._seal(stream, tail)
        for tail in self._tails.values():
            if tail[2] is not None:
                tail[2].close()
                tail[2] = None

    def __enter__(self) -> "SegmentWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
