"""`thrum setup HOST`: thrum's MCP server and hooks merged into a host's own config files.

Which files, in which format, and what goes in them is `HOSTS` (sources:
docs/design/hooks.md, "Set-up"). `plan` reads each file, computes its new text and
changes nothing; `apply` writes the files whose text changed. Rules:

1. Only thrum's own entries change: the MCP server named ``thrum`` and the hook
   entries whose command runs ``thrum hook HOST …``. Every other byte of the file
   stays as it was, comments included (JSON and JSONC through `thrum.hooks.jsonc`,
   TOML through tomlkit).
2. Idempotent: a second run finds every entry as it wants it and writes nothing.
   A changed entry (another agent, another thrum) is replaced in place.
3. ``remove`` takes thrum's entries out again, and containers they leave empty
   (``"hooks": {}``); a file left holding nothing but ``{}`` is deleted.
4. Project files by default (the repository's checkout), the user's with ``user``.
   A file that does not parse is an error naming it: nothing is written anywhere.
5. A file that is a symbolic link is written through the link.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import ThrumError
from . import hosts, jsonc

if TYPE_CHECKING:
    from tomlkit import TOMLDocument  # imported where used: `thrum setup` only

SERVER = "thrum"
TIMEOUT_S = 10  # a hook's timeout in the host (it answers in well under a second)


@dataclass
class Change:
    path: Path
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is (to be) deleted
    what: list[str] = field(default_factory=list)

    @property
    def action(self) -> str:
        if self.before == self.after:
            return "unchanged"
        if self.before is None:
            return "create"
        return "delete" if self.after is None else "update"


# One host's changes: each file, and the step that adds (or, given True, removes) thrum's part of it.
Steps = list[tuple[Path, Callable[[str, bool], tuple[str, list[str]]]]]


@dataclass(frozen=True)
class Entry:
    """What thrum puts in one host's files."""

    exe: str
    agent: str | None
    repo: Path | None  # None: the user's files (the host starts thrum in the project)

    def serve_args(self) -> list[str]:
        args = ["mcp", "serve"]
        if self.repo is not None:
            args += ["--repo", str(self.repo)]
        if self.agent:
            args += ["--agent-id", self.agent]
        return args

    def hook_command(self, host: str, event: str) -> str:
        words = [self.exe, "hook", host, event]
        if self.agent:
            words += ["--agent", self.agent]
        return shlex.join(words)


def _ours(host: str) -> re.Pattern[str]:
    return re.compile(r"(?:^|[\s/'\"])thrum['\"]?\s+hook\s+" + re.escape(host) + r"\s")


# --------------------------------------------------------------------------- JSON files


def _ours_in(current: object, mine: re.Pattern[str], style: str) -> list[tuple[int, int | None]]:
    """(group, index in the group; None when flat) of thrum's entries among one event's hooks."""
    found: list[tuple[int, int | None]] = []
    if not isinstance(current, list):
        return found
    for gi, item in enumerate(current):
        if style == "flat":
            if isinstance(item, dict) and mine.search(str(item.get("command", ""))):
                found.append((gi, None))
        elif isinstance(item, dict) and isinstance(item.get("hooks"), list):
            found += [
                (gi, hi)
                for hi, h in enumerate(item["hooks"])
                if isinstance(h, dict) and mine.search(str(h.get("command", "")))
            ]
    return found


def _json_hooks(
    text: str, host: str, entries: dict[str, dict[str, Any]], *, remove: bool, style: str
) -> tuple[str, list[str]]:
    """Merge (or take out) thrum's hook entry for each event of ``entries``.

    ``style`` ``groups``: ``hooks.Event = [{"hooks": [entry]}]`` (Claude Code, Codex,
    Gemini CLI); ``flat``: ``hooks.event = [entry]`` (Cursor).
    """
    mine = _ours(host)
    done = []
    for event, entry in entries.items():
        current = jsonc.get(text, ["hooks", event])
        found = _ours_in(current, mine, style)
        want = entry if style == "flat" else {"hooks": [entry]}
        before = text
        if remove:
            text = _drop(text, event, current, found, style)
        elif not found:
            text = jsonc.append_item(text, ["hooks", event], want)
        else:
            gi, hi = found[0]
            if hi is None or len(current[gi]["hooks"]) == 1:
                text = jsonc.replace_item(text, ["hooks", event], gi, want)
            else:
                text = jsonc.replace_item(text, ["hooks", event, gi, "hooks"], hi, entry)
            text = _drop(text, event, jsonc.get(text, ["hooks", event]), found[1:], style)
        if text != before:
            done.append(event)
    if remove and jsonc.get(text, ["hooks"]) == {}:
        text = jsonc.remove_member(text, ["hooks"])
    return text, done


def _drop(text: str, event: str, current: Any, found: list[tuple[int, int | None]], style: str) -> str:
    for gi, hi in sorted(found, reverse=True):
        group = current[gi]
        if hi is None or len(group["hooks"]) == 1:
            text = jsonc.remove_item(text, ["hooks", event], gi)
        else:
            text = jsonc.remove_item(text, ["hooks", event, gi, "hooks"], hi)
    if found and jsonc.get(text, ["hooks", event]) == []:
        text = jsonc.remove_member(text, ["hooks", event])
    return text


def _json_server(text: str, key: list[str], value: dict[str, Any], *, remove: bool) -> tuple[str, bool]:
    before = text
    if remove:
        text = jsonc.remove_member(text, key)
        if jsonc.get(text, key[:-1]) == {}:
            text = jsonc.remove_member(text, key[:-1])
    else:
        text = jsonc.set_member(text, key, value)
    return text, text != before


# --------------------------------------------------------------------------- TOML (Codex's config.toml)


FEATURE = "hooks"  # Codex's [features] key for hooks (`codex_hooks` before v0.130, now a deprecated alias)
FEATURE_KEYS = ("hooks", "codex_hooks")
FEATURE_MARK = "added by thrum setup"  # the comment that tells --remove the flag is thrum's to take out


def _toml_config(text: str, value: dict[str, Any], *, remove: bool) -> tuple[str, list[str]]:
    """Codex's config.toml: the MCP server ``[mcp_servers.thrum]`` and ``[features] hooks = true``.

    The flag is added only when the user's file says nothing about hooks (neither
    ``hooks`` nor the older ``codex_hooks``: a user who turned them off keeps them
    off) and ``[features]`` is absent or a plain table (an inline or dotted one
    cannot carry the mark), marked with a comment; --remove takes it out only when it carries the
    mark, and the ``[features]`` table with it when nothing else is left in it.
    """
    import tomlkit

    try:
        doc = tomlkit.parse(text)
    except Exception as exc:  # tomlkit's errors carry the line and column
        raise jsonc.JsoncError(str(exc)) from None
    if remove:
        return _toml_remove(doc, text)
    what = []
    servers = doc.get("mcp_servers")
    features = doc.get("features")
    if servers is None or servers.get(SERVER) is None or servers[SERVER].unwrap() != value:
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc["mcp_servers"] = servers
        table = tomlkit.table()
        for k, v in value.items():
            table[k] = v
        servers[SERVER] = table
        what.append("mcp_servers.thrum")
    plain = isinstance(features, tomlkit.items.Table) and not features.is_super_table()
    if features is None or (plain and not any(k in features for k in FEATURE_KEYS)):
        if features is None:
            features = tomlkit.table()
            doc["features"] = features
        flag = tomlkit.item(True)
        flag.comment(FEATURE_MARK)
        features[FEATURE] = flag
        what.append(f"features.{FEATURE}")
    if not what:
        return text, []
    out = tomlkit.dumps(doc)
    return (out if out.endswith("\n") else out + "\n"), what


def _toml_remove(doc: TOMLDocument, text: str) -> tuple[str, list[str]]:
    """Codex's config.toml without thrum's server, and without the hooks flag if thrum's mark is on it."""
    import tomlkit

    what = []
    servers = doc.get("mcp_servers")
    if servers is not None and SERVER in servers:
        del servers[SERVER]
        if not servers:
            del doc["mcp_servers"]
        what.append("mcp_servers.thrum")
    features = doc.get("features")
    if isinstance(features, tomlkit.items.Table) and FEATURE in features:
        flag = features.item(FEATURE)
        if isinstance(flag, tomlkit.items.Item) and FEATURE_MARK in flag.trivia.comment:
            del features[FEATURE]
            if not features:
                del doc["features"]
            what.append(f"features.{FEATURE}")
    if not what:
        return text, []
    out = tomlkit.dumps(doc)
    ends = len(text) - len(text.rstrip("\n"))  # the blank line set-up put before a table it appended stays behind
    return out.rstrip("\n") + "\n" * ends if out.strip() else "", what


# --------------------------------------------------------------------------- hosts


def _home() -> Path:
    return Path(os.path.expanduser("~"))


def _opencode_file(base: Path) -> Path:
    for name in ("opencode.jsonc", "opencode.json"):
        if (base / name).exists():
            return base / name
    return base / "opencode.json"


def _claude(root: Path | None, e: Entry) -> Steps:
    server = {"type": "stdio", "command": e.exe, "args": e.serve_args()}
    events = {
        ev: {"type": "command", "command": e.hook_command("claude", ev), "timeout": TIMEOUT_S}
        for ev in hosts.EVENTS["claude"]
    }
    mcp_file = root / ".mcp.json" if root else _home() / ".claude.json"
    settings = (root / ".claude" if root else _home() / ".claude") / "settings.json"
    return [
        (mcp_file, lambda t, rm: _server_step(t, ["mcpServers", SERVER], server, rm)),
        (settings, lambda t, rm: _hooks_step(t, "claude", events, rm, "groups")),
    ]


def _codex(root: Path | None, e: Entry) -> Steps:
    base = root / ".codex" if root else Path(os.environ.get("CODEX_HOME") or _home() / ".codex")
    server = {"command": e.exe, "args": e.serve_args()}
    names = [ev for ev, r in hosts.EVENTS["codex"].items() if r != "notify"]
    events = {ev: {"type": "command", "command": e.hook_command("codex", ev), "timeout": TIMEOUT_S} for ev in names}

    return [
        (base / "config.toml", lambda t, rm: _toml_config(t, server, remove=rm)),
        (base / "hooks.json", lambda t, rm: _hooks_step(t, "codex", events, rm, "groups")),
    ]


def _gemini(root: Path | None, e: Entry) -> Steps:
    path = (root / ".gemini" if root else _home() / ".gemini") / "settings.json"
    server = {"command": e.exe, "args": e.serve_args()}
    events = {
        ev: {"name": "thrum", "type": "command", "command": e.hook_command("gemini", ev), "timeout": TIMEOUT_S * 1000}
        for ev in hosts.EVENTS["gemini"]
    }

    def step(t: str, rm: bool) -> tuple[str, list[str]]:
        t, a = _server_step(t, ["mcpServers", SERVER], server, rm)
        t, b = _hooks_step(t, "gemini", events, rm, "groups")
        return t, a + b

    return [(path, step)]


def _cursor(root: Path | None, e: Entry) -> Steps:
    base = root / ".cursor" if root else _home() / ".cursor"
    server = {"command": e.exe, "args": e.serve_args()}
    events = {ev: {"command": e.hook_command("cursor", ev)} for ev in hosts.EVENTS["cursor"]}

    def hooks_step(t: str, rm: bool) -> tuple[str, list[str]]:
        if not rm and jsonc.get(t or "{}", ["version"]) is None:
            t = jsonc.set_member(t, ["version"], 1)
        t, done = _hooks_step(t, "cursor", events, rm, "flat")
        if rm and set((jsonc.get(t, []) or {}).keys()) == {"version"}:
            t = jsonc.remove_member(t, ["version"])
        return t, done

    return [
        (base / "mcp.json", lambda t, rm: _server_step(t, ["mcpServers", SERVER], server, rm)),
        (base / "hooks.json", hooks_step),
    ]


def _opencode(root: Path | None, e: Entry) -> Steps:
    base = root if root else Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config") / "opencode"
    server = {"type": "local", "command": [e.exe, *e.serve_args()], "enabled": True}
    return [(_opencode_file(base), lambda t, rm: _server_step(t, ["mcp", SERVER], server, rm))]


def _server_step(text: str, key: list[str], value: dict[str, Any], remove: bool) -> tuple[str, list[str]]:
    out, changed = _json_server(text, key, value, remove=remove)
    return out, [".".join(key)] if changed else []


def _hooks_step(text: str, host: str, events: dict[str, Any], remove: bool, style: str) -> tuple[str, list[str]]:
    out, done = _json_hooks(text, host, events, remove=remove, style=style)
    return out, [f"hooks.{ev}" for ev in done]


HOSTS: dict[str, Callable[[Path | None, Entry], Steps]] = {
    "claude": _claude,
    "codex": _codex,
    "gemini": _gemini,
    "cursor": _cursor,
    "opencode": _opencode,
}


# --------------------------------------------------------------------------- plan and apply


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ThrumError(f"cannot read {path}: {exc}") from None


def plan(host: str, entry: Entry, *, remove: bool = False) -> list[Change]:
    """What setting up (or removing) thrum in ``host`` changes, file by file; writes nothing.

    Raises:
        ThrumError: a file cannot be read or does not parse (named in the message).
    """
    changes = []
    for path, step in HOSTS[host](entry.repo, entry):
        before = _read(path)
        if before is None and remove:
            changes.append(Change(path, None, None))
            continue
        try:
            after, what = step(before or "", remove)
        except jsonc.JsoncError as exc:
            raise ThrumError(
                f"cannot set up {host}: {path} does not parse ({exc}); fix it, or add thrum by hand"
            ) from None
        if remove and what and after.strip() in ("", "{}"):
            changes.append(Change(path, before, None, what))  # nothing left but thrum's: the file goes
            continue
        if before is None and not after.endswith("\n"):
            after += "\n"
        changes.append(Change(path, before, after, what))
    return changes


def apply(changes: list[Change]) -> None:
    """Write the files that changed (atomically, through links, keeping their mode)."""
    for c in changes:
        if c.action == "unchanged":
            continue
        target = Path(os.path.realpath(c.path))
        if c.after is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = target.stat().st_mode & 0o7777 if target.exists() else 0o644
        tmp = target.with_name(f".{target.name}.thrum-{os.getpid()}.tmp")
        tmp.write_text(c.after, encoding="utf-8")
        os.chmod(tmp, mode)
        os.replace(tmp, target)


def describe(changes: list[Change], base: Path | None = None) -> list[dict[str, Any]]:
    """The changes as JSON-able records (``thrum setup --json``)."""
    out = []
    for c in changes:
        shown = str(c.path.relative_to(base)) if base and c.path.is_relative_to(base) else str(c.path)
        out.append({"path": shown, "action": c.action, "entries": c.what})
    return out


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2)
