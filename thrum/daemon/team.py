"""The daemon's side of the team root: which root is in effect, the roster, and what the team
commands need from them (docs/design/trust.md, "The team root", "Admission", "Rotation").

Rules:

1. The root in effect is the one committed on the project's normal branch
   (`thrum.sync.teamfile`), read at start-up and after every sync cycle (cheap: a
   ref, a tree entry, a blob). A file that cannot be used keeps the last good root
   (or trust on first use) and is reported.
2. When the root changes (adopted, edited, removed), the lines judged under the old
   one are judged again: the view is rebuilt (`Writer.rejudge`). The blob judged last
   is remembered in ``.thrum/var/team-root.json`` so a daemon that starts under a
   root it has not judged with rebuilds once.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..paths import ThrumPaths
from ..trust.binding import LogBinding
from ..trust.roster import Roster

log = logging.getLogger(__name__)

__all__ = ["TeamState", "open_trust"]

SEEN_FILE = "team-root.json"


class TeamState:
    def __init__(self, paths: ThrumPaths, remote: str, roster: Roster, binding: LogBinding | None = None):
        self.paths = paths
        self.remote = remote
        self.roster = roster
        self.binding = binding  # the log id every line this daemon signs names (trust/binding.py)
        self.committed = None  # thrum.sync.teamfile.CommittedRoot last read
        self.error: str | None = None

    def read(self) -> bool:
        """Read the committed root (worker thread); True when the root in effect changed."""
        from ..sync.teamfile import read_committed_root

        try:
            found = read_committed_root(self.paths.main_repo, self.remote)
        except Exception as exc:  # noqa: BLE001 - a repository we cannot read keeps the root in effect
            self.error = f"cannot read the team root: {exc}"
            return False
        self.committed = found
        self.error = found.error
        if found.error is not None:
            log.warning("%s; keeping the root in effect", found.error)
            return False
        if self.binding is not None:
            self.binding.set(found.root.log_id if found.root is not None else None)
        return self.roster.set_root(found.root)

    @property
    def blob(self) -> str | None:
        return self.committed.blob if self.committed is not None and self.roster.root is not None else None

    def judged_blob(self) -> str | None:
        try:
            data = json.loads((self.paths.var / SEEN_FILE).read_text())
        except (OSError, ValueError):
            return None
        return data.get("blob") if isinstance(data, dict) else None

    def mark_judged(self) -> None:
        path: Path = self.paths.var / SEEN_FILE
        tmp = path.with_name(f".{SEEN_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"blob": self.blob}))
        os.replace(tmp, path)

    def status(self) -> dict:
        from ..sync.teamfile import CommittedRoot

        found = self.committed if isinstance(self.committed, CommittedRoot) else None
        out = found.summary() if found is not None else {"trust": "tofu", "source": None, "error": self.error}
        if self.roster.root is not None and out.get("trust") != "team-root":
            out["trust"] = "team-root"  # the last good root stays in effect while the file is broken
            out.update(log_id=self.roster.root.log_id, policy=self.roster.root.policy)
        out["error"] = self.error
        out.update(self.roster.to_json())
        return out


def open_trust(paths: ThrumPaths, config, ring, binding: LogBinding, event_log=None):
    """(TeamState, VerifiedFold) of a starting daemon: the committed root read before anything
    is judged, the verifier under it, and the facts judged by earlier runs learned again.
    ``event_log``: where a retirement's check looks for the lines it covers (without it, a
    retirement covering applied lines always rebuilds)."""
    from ..store.facts import FactFile
    from ..store.retired import author_lines
    from ..store.verified import VerifiedFold
    from ..trust.verdicts import VerdictMemory
    from ..trust.verify import Verifier

    team = TeamState(paths, config.remote, Roster(ring), binding)
    team.read()
    verifier = Verifier(ring, skew_s=float(config.clock_skew), roster=team.roster, binding=binding)
    fold = VerifiedFold(
        verifier,
        VerdictMemory(paths.var / "verified-lines"),
        facts=FactFile(paths.var / "team-facts.jsonl"),
        lines_of=(lambda name: author_lines(event_log, name)) if event_log is not None else None,
    )
    fold.prime()  # admissions, rotations, revocations, group creators
    return team, fold
