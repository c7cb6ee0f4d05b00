"""Someone with push access to the team's remote, editing ``a-sync`` with plain git.

The product never runs ``git``; these tests do, on purpose: an attacker uses
whatever tool they like, and plain git can write what pygit2-based code never
would (symlinks, junk files, rewritten lines, forged events).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Mallory",
    "GIT_AUTHOR_EMAIL": "mallory@example.invalid",
    "GIT_COMMITTER_NAME": "Mallory",
    "GIT_COMMITTER_EMAIL": "mallory@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


class Attacker:
    """A plain-git clone of the remote's ``a-sync`` that pushes whatever it likes."""

    def __init__(self, remote: Path, workdir: Path):
        self.remote = Path(remote)
        self.dir = Path(workdir)
        # --no-local: through git's transport, which a replica's repack of the remote (its old
        # packs removed once the new one is in place) cannot disturb; a local clone copies the
        # files it listed and misses a pack removed meanwhile (thrum.sync.maintenance, rule 5)
        self._git(
            "clone", "--quiet", "--no-local", "--branch", "a-sync", str(self.remote), str(self.dir), cwd=self.dir.parent
        )

    def _git(self, *args: str, cwd: Path | None = None) -> str:
        env = {**os.environ, **GIT_ENV, "HOME": str(self.dir.parent)}
        proc = subprocess.run(
            ["git", "-c", "core.symlinks=true", *args],
            cwd=cwd or self.dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
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
            shutil.rmtree(path)

    def push(self, message: str = "mallory was here") -> None:
        self._git("add", "-A")
        self._git("commit", "--quiet", "--allow-empty", "-m", message)
        self._git("push", "--quiet", "--force", "origin", "HEAD:a-sync")

    def push_entries(self, entries: dict[str, tuple[int, bytes]], message: str = "mallory's tree") -> None:
        """Push the current tip plus ``entries`` ({path: (mode, content)}), written as raw git
        objects: any mode (links 0o120000, gitlinks 0o160000 with a commit id as content,
        odd modes such as 0o100664), any name, tens of thousands of files at once."""
        import pygit2

        self.pull()
        repo = pygit2.Repository(str(self.dir))
        head = repo.head.peel(pygit2.Commit)
        nested: dict = {}
        for path, value in entries.items():
            node = nested
            *dirs, name = path.split("/")
            for d in dirs:
                node = node.setdefault(d.encode(), {})
            node[name.encode()] = value

        def write(base, node) -> pygit2.Oid:
            items = {}
            if base is not None:
                raw = repo.odb.read(base)[1]
                i = 0
                while i < len(raw):
                    sp = raw.index(b" ", i)
                    nul = raw.index(b"\0", sp)
                    items[raw[sp + 1 : nul]] = (int(raw[i:sp], 8), raw[nul + 1 : nul + 21])
                    i = nul + 21
            for name, value in node.items():
                if isinstance(value, dict):
                    old = items.get(name)
                    sub = pygit2.Oid(raw=old[1]) if old is not None and old[0] == 0o40000 else None
                    items[name] = (0o40000, write(sub, value).raw)
                else:
                    mode, content = value
                    oid = pygit2.Oid(hex=content.decode()) if mode == 0o160000 else repo.create_blob(content)
                    items[name] = (mode, oid.raw)
            order = sorted(items.items(), key=lambda kv: kv[0] + b"/" if kv[1][0] == 0o40000 else kv[0])
            raw = b"".join(b"%o %s\0%s" % (mode, name, oid) for name, (mode, oid) in order)
            return repo.odb.write(pygit2.enums.ObjectType.TREE, raw)

        sig = pygit2.Signature("Mallory", "mallory@example.invalid")
        commit = repo.create_commit(None, sig, sig, message, write(head.tree_id, nested), [head.id])
        repo.references["refs/heads/a-sync"].set_target(commit)
        self._git("push", "--quiet", "--force", "origin", "a-sync:a-sync")

    def remote_blobs(self) -> bytes:
        """Every blob in the remote's ``a-sync`` tip, concatenated (to look for leaks)."""
        self.pull()
        out = []
        for rel in self.files():
            path = self.dir / rel
            out.append(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
        return b"\n".join(out)


def entries_under(root: Path) -> list[str]:
    """Every file, directory and link below ``root`` except ``.git`` (not followed)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            if rel != ".git":
                found.append(rel)
    return sorted(found)


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


def git(machine, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "HOME": str(machine.path.parent)}
    return subprocess.run(
        ["git", *args], cwd=machine.path, env=env, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def adopt_root(t, admin_machine, *others, policy: str = "admins") -> dict:
    """`thrum team init` on the admin's machine, committed and pushed on main; the others pull it."""
    made = admin_machine.json("team", "init", "--policy", policy)
    git(admin_machine, "add", "thrum-team.toml")
    git(admin_machine, "commit", "-q", "-m", "thrum team root")
    git(admin_machine, "push", "-q", "origin", "main")
    for m in others:
        git(m, "pull", "-q", "--ff-only", "origin", "main")
    return made


def steal(machine, name: str, tmp_path) -> object:
    """A copy of ``name``'s private key file, as a thief has it."""
    dest = tmp_path / f"stolen-{name}"
    dest.mkdir(exist_ok=True)
    shutil.copy2(machine.path / ".thrum" / "identities" / f"{name}.key", dest / f"{name}.key")
    os.chmod(dest / f"{name}.key", 0o600)
    return dest / f"{name}.key"


def fork_latest(attacker: Attacker, agent: str, key_file: Path, into: str) -> tuple[dict, dict]:
    """A second event at ``agent``'s latest chain position (a read receipt written with the
    agent's stolen key into ``into``, not pushed yet): a fork of its chain. Returns the
    event it forks from and the forged one."""
    from thrum import events as ev

    rel = attacker.file_of("messages", agent)
    target = [d for d in attacker.events(rel) if "chain" in d][-1]
    other = {
        "type": "message.read",
        "timestamp": ev.now_rfc3339(),
        "event_id": ev.new_ulid(),
        "v": 1,
        "agent_id": agent,
        "message_ids": [target["message_id"]],
        "chain": dict(target["chain"]),
    }
    attacker.write(into, forge(other, agent, key_file))
    return target, other


def _history(t) -> None:
    a, b = t.machines
    a.agent("alice", "implementer")
    b.agent("bob", "reviewer")
    a.sync()
    b.sync()
    b.run("send", "hello alice", "--to", "@alice", agent="bob")
    b.sync()
    a.sync()


def team_with_history(team):
    """Two machines, alice on A and bob on B, registered and synced, bob's first
    message delivered to A: the honest state each hostile test starts from (a copy of
    it, built once per run: conftest.TeamFactory.prepared)."""
    t = team.prepared("history", _history)
    a, b = t.machines
    return t, a, b
