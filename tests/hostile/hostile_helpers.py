"""Someone with push access to the team's remote, editing ``a-sync`` with plain git.

The product never runs ``git``; these tests do, on purpose: an attacker uses
whatever tool they like, and plain git can write what pygit2-based code never
would (symlinks, junk files, rewritten lines, forged events).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Mallory", "GIT_AUTHOR_EMAIL": "mallory@example.invalid",
    "GIT_COMMITTER_NAME": "Mallory", "GIT_COMMITTER_EMAIL": "mallory@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
}


class Attacker:
    """A plain-git clone of the remote's ``a-sync`` that pushes whatever it likes."""

    def __init__(self, remote: Path, workdir: Path):
        self.remote = Path(remote)
        self.dir = Path(workdir)
        self._git("clone", "--quiet", "--branch", "a-sync", str(self.remote), str(self.dir), cwd=self.dir.parent)

    def _git(self, *args: str, cwd: Path | None = None) -> str:
        env = {**os.environ, **GIT_ENV, "HOME": str(self.dir.parent)}
        proc = subprocess.run(["git", "-c", "core.symlinks=true", *args], cwd=cwd or self.dir, env=env,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout

    def pull(self) -> None:
        """Start from the remote's current tip."""
        self._git("fetch", "--quiet", "origin", "a-sync")
        self._git("reset", "--quiet", "--hard", "origin/a-sync")

    def files(self) -> list[str]:
        return sorted(self._git("ls-files").split())

    def file_of(self, kind: str, agent: str) -> str:
        """The path of an existing file holding ``agent``'s ``kind`` (messages/receipts) events."""
        for rel in reversed(self.files()):
            if rel.startswith(f"{kind}/{agent}.") or rel.startswith(f"{kind}/{agent}/"):
                return rel
        raise AssertionError(f"no {kind} file of {agent} on the remote: {self.files()}")

    def lines(self, rel: str) -> list[bytes]:
        return (self.dir / rel).read_bytes().splitlines()

    def events(self, rel: str) -> list[dict]:
        return [json.loads(line) for line in self.lines(rel)]

    def write(self, rel: str, data: bytes) -> None:
        path = self.dir / rel
        if path.is_symlink():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def append(self, rel: str, line: bytes) -> None:
        with open(self.dir / rel, "ab") as f:
            f.write(line.rstrip(b"\n") + b"\n")

    def symlink(self, rel: str, target: str) -> None:
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_file():
            path.unlink()
        os.symlink(target, path)

    def remove(self, rel: str) -> None:
        self._git("rm", "-r", "--quiet", "--cached", rel)
        path = self.dir / rel
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            import shutil
            shutil.rmtree(path)

    def push(self, message: str = "mallory was here") -> None:
        self._git("add", "-A")
        self._git("commit", "--quiet", "--allow-empty", "-m", message)
        self._git("push", "--quiet", "--force", "origin", "HEAD:a-sync")

    def remote_blobs(self) -> bytes:
        """Every blob in the remote's ``a-sync`` tip, concatenated (to look for leaks)."""
        self.pull()
        out = []
        for rel in self.files():
            path = self.dir / rel
            out.append(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
        return b"\n".join(out)


def links_under(root: Path) -> list[str]:
    """Every symlink below ``root`` (not followed)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                found.append(str(p.relative_to(root)))
    return found


def events_file(attacker: Attacker) -> str:
    """The (last) file of shared lifecycle events on the remote, whatever the layout."""
    found = [f for f in attacker.files() if f == "events.jsonl" or f.startswith("events/")]
    assert found, f"no events file on the remote: {attacker.files()}"
    return found[-1]


def forge(event: dict, signer: str, key_file: Path | None) -> bytes:
    """``event`` as a line signed as ``signer`` with the private key in ``key_file``
    (a stolen key, or the attacker's own); unsigned when ``key_file`` is None."""
    from thrum import events as ev
    from thrum.trust import keys, signing

    d = {k: v for k, v in event.items() if k != "sig"}
    if key_file is None:
        return ev.encode_line(d)
    from cryptography.hazmat.primitives import serialization

    private = serialization.load_pem_private_key(Path(key_file).read_bytes(), password=None)
    assert isinstance(private, keys.Ed25519PrivateKey)
    return ev.encode_line(signing.sign(d, signer, private))
