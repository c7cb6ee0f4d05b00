"""Helpers shared by the CLI unit tests."""

from __future__ import annotations

import json
from pathlib import Path


def write_identity(repo: Path, name: str, role: str, module: str = "", **extra) -> None:
    data = {"name": name, "role": role, "module": module, "display": "", "created_at": "2026-01-01T00:00:00Z", **extra}
    (repo / ".thrum" / "identities" / f"{name}.json").write_text(json.dumps(data))
