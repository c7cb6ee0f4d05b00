"""Gas City's exec mail provider, as gc runs it, in Python (for the conformance suite).

Mirrors gc's internal/mail/exec: one subprocess per call (``SCRIPT op [arg]``, no
shell), stdin always given (JSON for send/reply, empty otherwise), a working
directory that is not the repository (only ``THRUM_REPO`` says where the mail is),
exit 2 read as "success, no output", stdout with trailing newlines stripped,
stderr trimmed as the error text, and the two stderr markers mapped to errors.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

SCRIPT = shutil.which("thrum-gc-mail") or str(Path(sys.executable).parent / "thrum-gc-mail")
TIMEOUT = 30  # gc kills a call after 30 s


class ProviderError(Exception):
    """A failed call: ``text`` is what gc would show (stderr, trimmed)."""

    def __init__(self, op: str, code: int, text: str):
        super().__init__(f"{op}: exit {code}: {text}")
        self.op, self.code, self.text = op, code, text

    @property
    def not_found(self) -> bool:
        return "gc-mail-error:not-found" in self.text

    @property
    def already_archived(self) -> bool:
        return "already archived" in self.text


def go_json(obj: dict) -> bytes:
    """Go's json.Marshal: compact, no trailing newline, <, > and & escaped."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode("utf-8")


def env_for(repo: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THRUM_", "GC_"))}
    env.update(
        {"THRUM_REPO": str(repo), "THRUM_WS_PORT": "0", "THRUM_SYNC_INTERVAL": "3600", "THRUM_SYNC_DEBOUNCE": "3600"}
    )
    env.update(extra)
    return env


class Provider:
    """One provider script, called the way gc calls it."""

    def __init__(self, repo: Path, cwd: Path, script: str = SCRIPT, **env: str):
        self.repo, self.cwd, self.script = Path(repo), Path(cwd), script
        self.env = env_for(self.repo, **env)

    def raw(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.script, *args], input=stdin, capture_output=True, cwd=self.cwd, env=self.env, timeout=TIMEOUT
        )

    def run(self, *args: str, stdin: bytes = b"") -> str:
        """gc's ``run``: trimmed stdout on success (exit 0 or 2), ProviderError otherwise."""
        proc = self.raw(*args, stdin=stdin)
        if proc.returncode not in (0, 2):
            text = proc.stderr.decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
            raise ProviderError(args[0], proc.returncode, text)
        if proc.returncode == 2:
            return ""
        return proc.stdout.decode("utf-8").rstrip("\n")

    # ---------------------------------------------------------------- the operations

    def ensure_running(self) -> None:
        try:
            self.run("ensure-running")
        except ProviderError:
            pass  # gc ignores the result

    def send(self, frm: str, to: str, subject: str, body: str) -> dict:
        return message(self.run("send", to, stdin=go_json({"from": frm, "subject": subject, "body": body})))

    def reply(self, msg_id: str, frm: str, subject: str, body: str) -> dict:
        return message(self.run("reply", msg_id, stdin=go_json({"from": frm, "subject": subject, "body": body})))

    def inbox(self, recipient: str) -> list[dict] | None:
        return messages(self.run("inbox", recipient))

    def check(self, recipient: str) -> list[dict] | None:
        return messages(self.run("check", recipient))

    def all(self, recipient: str) -> list[dict] | None:
        return messages(self.run("all", recipient))

    def thread(self, key: str) -> list[dict] | None:
        return messages(self.run("thread", key))

    def get(self, msg_id: str) -> dict:
        return message(self.run("get", msg_id))

    def read(self, msg_id: str) -> dict:
        return message(self.run("read", msg_id))

    def mark_read(self, msg_id: str) -> str:
        return self.run("mark-read", msg_id)

    def mark_unread(self, msg_id: str) -> str:
        return self.run("mark-unread", msg_id)

    def archive(self, msg_id: str) -> str:
        return self.run("archive", msg_id)

    def delete(self, msg_id: str) -> str:
        return self.run("delete", msg_id)

    def count(self, recipient: str) -> tuple[int, int]:
        out = self.run("count", recipient)
        if not out:
            return 0, 0
        doc = json.loads(out)
        return doc["total"], doc["unread"]


def message(out: str) -> dict:
    """gc's unmarshalMessage, plus the checks its Go types make (strings, bool, RFC 3339 time)."""
    doc = json.loads(out)
    assert isinstance(doc, dict), out
    for key in ("id", "from", "to", "subject", "body"):
        assert isinstance(doc.get(key, ""), str), (key, doc)
    assert isinstance(doc.get("read", False), bool)
    assert isinstance(doc.get("priority", 0), int)
    assert isinstance(doc.get("cc", []), list)
    doc["created"] = parse_rfc3339(doc["created_at"])
    return doc


def messages(out: str) -> list[dict] | None:
    """gc's Inbox/Check/All/Thread: empty output is nil; otherwise a JSON array (never ``[]``)."""
    if out == "":
        return None
    docs = json.loads(out)
    if docs is None:
        return None
    assert isinstance(docs, list) and docs, f"an empty list must print nothing, got {out!r}"
    return [message(json.dumps(d)) for d in docs]


def parse_rfc3339(value: str) -> datetime:
    """Go's time.Time JSON: RFC 3339 with a zone (Z or ±hh:mm), fractions allowed."""
    assert isinstance(value, str) and "T" in value, value
    assert value.endswith("Z") or value[-6] in "+-", f"no time zone in {value!r}"
    return datetime.fromisoformat(value.replace("Z", "+00:00"))
