"""`thrum setup HOST` against existing config files: merge, idempotence, --remove, --dry-run, --user."""

from __future__ import annotations

import json

import pytest
import tomlkit

from thrum.hooks import jsonc

CLAUDE_SETTINGS = """{
  // shared by the team: keep this comment
  "permissions": {"allow": ["Bash(npm test)"]},
  "hooks": {
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]},
    ],
  },
}
"""
MCP_JSON = """{
  "mcpServers": {
    "github": {"command": "gh-mcp", "args": ["--stdio"]}
  }
}
"""
CODEX_TOML = """# my codex settings
model = "gpt-5"  # keep me

[mcp_servers.docs]
command = "docs-mcp"
args = ["serve"]

[profiles.fast]
model = "gpt-5-mini"
"""
GEMINI_SETTINGS = """{
  /* gemini settings, with comments */
  "theme": "Dracula",
  "mcpServers": {"other": {"command": "other-mcp"}},
  "hooks": {
    "BeforeTool": [{"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "./check.sh"}]}]
  }
}
"""
CURSOR_HOOKS = """{
  "version": 1,
  "hooks": {
    "afterFileEdit": [{"command": "./format.sh"}]
  }
}
"""
OPENCODE = """{
  "$schema": "https://opencode.ai/config.json",
  // model choice
  "model": "anthropic/claude-sonnet-4-5",
  "mcp": {"jira": {"type": "remote", "url": "https://jira.example.com/mcp", "enabled": false}},
}
"""

HOST_FILES = {
    "claude": {".claude/settings.json": CLAUDE_SETTINGS, ".mcp.json": MCP_JSON},
    "codex": {".codex/config.toml": CODEX_TOML},
    "gemini": {".gemini/settings.json": GEMINI_SETTINGS},
    "cursor": {".cursor/hooks.json": CURSOR_HOOKS},
    "opencode": {"opencode.jsonc": OPENCODE},
}


@pytest.fixture(scope="module")
def repo(repo_factory):
    r = repo_factory("setup")
    r.agent("alice", "lead")
    r.agent("bob", "dev")
    return r


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _read(root, rel):
    path = root / rel
    return path.read_text() if path.exists() else None


def _load(path, text):
    return tomlkit.parse(text).unwrap() if path.endswith(".toml") else jsonc.parse(text).python()


@pytest.mark.parametrize("host", list(HOST_FILES))
def test_setup_merges_is_idempotent_and_removes_cleanly(repo, host, tmp_path):
    home = tmp_path / "home"  # the same files in HOME: project set-up must leave them alone
    home.mkdir()
    _write(home, HOST_FILES[host])
    before = {p.relative_to(home).as_posix(): p.read_bytes() for p in home.rglob("*") if p.is_file()}

    def setup(*args):
        return repo.ok("setup", host, *args, "--json", env={"HOME": str(home)}).json()

    _write(repo.path, HOST_FILES[host])
    first = setup("--agent", "bob")
    assert first["agent"] == "bob"
    changed = {f["path"]: f for f in first["files"]}
    assert all(f["action"] in ("create", "update") for f in changed.values()), changed
    for rel, original in HOST_FILES[host].items():
        text = _read(repo.path, rel)
        old, new = _load(rel, original), _load(rel, text)
        for key in old:  # every setting the user had is still there
            if key not in ("hooks", "mcpServers", "mcp_servers", "mcp"):
                assert new[key] == old[key], key
        for comment in [line.strip() for line in original.splitlines() if line.strip().startswith(("//", "/*", "#"))]:
            assert comment in text
    # the entries thrum wants are there
    if host == "claude":
        settings = jsonc.parse(_read(repo.path, ".claude/settings.json")).python()
        assert {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "PreToolUse"} <= set(settings["hooks"])
        cmds = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
        assert cmds[0] == "notify-send done" and cmds[1].endswith("hook claude Stop --agent bob")
        servers = json.loads(_read(repo.path, ".mcp.json"))["mcpServers"]
        assert set(servers) == {"github", "thrum"} and servers["thrum"]["args"][-2:] == ["--agent-id", "bob"]
    if host == "codex":
        conf = tomlkit.parse(_read(repo.path, ".codex/config.toml")).unwrap()
        assert set(conf["mcp_servers"]) == {"docs", "thrum"} and conf["profiles"]["fast"]["model"] == "gpt-5-mini"
        lines = iter(_read(repo.path, ".codex/config.toml").splitlines())
        assert all(line in lines for line in CODEX_TOML.splitlines())  # every line kept, in order
        hooks = json.loads(_read(repo.path, ".codex/hooks.json"))["hooks"]
        assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"}
        assert conf["features"] == {"hooks": True}  # Codex runs hooks.json only with it (docs/design/hooks.md)
    if host == "gemini":
        conf = jsonc.parse(_read(repo.path, ".gemini/settings.json")).python()
        assert set(conf["mcpServers"]) == {"other", "thrum"}
        assert {"SessionStart", "BeforeAgent", "AfterTool", "AfterAgent", "BeforeTool"} == set(conf["hooks"])
        assert conf["hooks"]["AfterAgent"][0]["hooks"][0]["timeout"] == 10_000
    if host == "cursor":
        conf = json.loads(_read(repo.path, ".cursor/hooks.json"))
        assert conf["version"] == 1 and set(conf["hooks"]) == {"afterFileEdit", "sessionStart", "postToolUse", "stop"}
        assert json.loads(_read(repo.path, ".cursor/mcp.json"))["mcpServers"]["thrum"]["command"].endswith("thrum")
    if host == "opencode":
        conf = jsonc.parse(_read(repo.path, "opencode.jsonc")).python()
        assert conf["mcp"]["thrum"]["type"] == "local" and conf["mcp"]["thrum"]["command"][1:3] == ["mcp", "serve"]
        assert not (repo.path / "opencode.json").exists()
    snapshot = {rel: _read(repo.path, rel) for rel in changed}
    again = setup("--agent", "bob")
    assert {f["action"] for f in again["files"]} == {"unchanged"}
    assert {rel: _read(repo.path, rel) for rel in changed} == snapshot
    # another agent replaces thrum's entries in place, never adds a second set
    other = setup("--agent", "alice")
    assert all(f["action"] in ("update", "unchanged") for f in other["files"])
    for rel in changed:
        text = _read(repo.path, rel)
        assert "--agent bob" not in text and text.count("thrum hook") == text.count("--agent alice")
    removed = setup("--remove")
    assert all(f["action"] in ("update", "delete") for f in removed["files"])
    for rel, original in HOST_FILES[host].items():
        assert _read(repo.path, rel) == original, rel  # byte for byte
    for rel in changed:
        if rel not in HOST_FILES[host]:
            assert not (repo.path / rel).exists(), rel  # created by setup, gone with --remove
    assert {p.relative_to(home).as_posix(): p.read_bytes() for p in home.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "features, added",
    [
        ("[features]\nweb_search = true  # mine\n", True),  # thrum's flag joins the user's table
        ("[features]\nhooks = false  # I turned hooks off\n", False),  # the user's choice stands
        ("[features]\ncodex_hooks = true\n", False),  # the older name: the user has decided already
        ("features = { web_search = true }\n", False),  # an inline table cannot carry thrum's mark
    ],
)
def test_codex_setup_turns_hooks_on_only_where_the_user_said_nothing(repo, features, added):
    path = repo.path / ".codex" / "config.toml"
    original = f'model = "gpt-5"\n\n{features}'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(original)
    first = repo.ok("setup", "codex", "--agent", "bob", "--json").json()
    entries = next(f["entries"] for f in first["files"] if f["path"] == ".codex/config.toml")
    assert ("features.hooks" in entries) is added
    text = path.read_text()
    conf = tomlkit.parse(text).unwrap()
    if added:
        assert conf["features"] == {"web_search": True, "hooks": True} and "# added by thrum setup" in text
    else:
        assert conf["features"] == tomlkit.parse(features).unwrap()["features"]
    assert features.splitlines()[1 if features.startswith("[") else 0] in text  # the user's line, comment and all
    removed = repo.ok("setup", "codex", "--remove", "--json").json()
    entries = next(f["entries"] for f in removed["files"] if f["path"] == ".codex/config.toml")
    assert ("features.hooks" in entries) is added
    assert path.read_text() == original  # byte for byte: only what set-up added went
    path.unlink()


def test_dry_run_writes_nothing_and_shows_the_diff(repo):
    import shutil

    shutil.rmtree(repo.path / ".gemini", ignore_errors=True)
    r = repo.ok("setup", "gemini", "--agent", "bob", "--dry-run")
    assert ".gemini/settings.json: would be created (mcpServers.thrum" in r.out
    assert "+++ .gemini/settings.json" in r.out and "hook gemini AfterAgent --agent bob" in r.out
    assert not (repo.path / ".gemini" / "settings.json").exists()


def test_a_host_by_its_product_name_is_the_same_host(repo):
    """`claude-code` as people call it, `Gemini-CLI` in any case: the same set-up as the short name."""
    short = repo.ok("setup", "claude", "--agent", "bob", "--dry-run").out
    assert repo.ok("setup", "claude-code", "--agent", "bob", "--dry-run").out == short
    assert "gemini" in repo.ok("setup", "Gemini-CLI", "--agent", "bob", "--dry-run").out


def test_user_setup_writes_the_users_files(repo, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    project = repo.path / ".mcp.json"
    before = project.read_bytes() if project.exists() else None
    r = repo.ok("setup", "claude", "--user", "--agent", "bob", "--json", env={"HOME": str(home)})
    paths = {f["path"] for f in r.json()["files"]}
    assert paths == {str(home / ".claude.json"), str(home / ".claude" / "settings.json")}
    server = json.loads((home / ".claude.json").read_text())["mcpServers"]["thrum"]
    assert server["args"] == ["mcp", "serve", "--agent-id", "bob"]  # no --repo: the user's hosts start it anywhere
    assert (project.read_bytes() if project.exists() else None) == before  # the project's files untouched


def test_a_file_that_does_not_parse_is_named_and_nothing_is_written(repo):
    bad = repo.path / ".cursor" / "hooks.json"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text('{"version": 1, "hooks": {')
    r = repo.run("setup", "cursor", "--agent", "bob")
    assert r.code == 1 and ".cursor/hooks.json does not parse" in r.err_line and "line 1" in r.err_line
    assert not (repo.path / ".cursor" / "mcp.json").exists()
    bad.unlink()


def test_an_unknown_agent_is_refused(repo):
    r = repo.run("setup", "claude", "--agent", "nobody")
    assert r.code == 1 and "nobody" in r.err_line and "@alice" in r.err_line


def test_setup_inside_tmux_records_the_pane_for_wake_ups(repo, tmp_path):
    """Run from the agent's tmux pane, set-up remembers it, so the agent can be woken before its first session."""
    sock = str(tmp_path / "tmux-sock")
    env = {"TMUX": f"{sock},4242,0", "TMUX_PANE": "%7"}
    repo.ok("setup", "gemini", "--agent", "alice", env=env)
    status = repo.ok("wake", "status", "--json", agent="alice").json()
    assert (status["pane"], status["socket"], status["enabled"]) == ("%7", sock, True)
    repo.ok("setup", "gemini", "--remove")
