"""`thrum mcp serve` start-up (identity, daemon) and stdout hygiene; `thrum mcp config`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

from fixtures.repos.builders import make_repo
from mcp_helpers import THRUM, mcp_server, run_thrum, serve_refused

PROTOCOL = "2025-06-18"  # a handshake version hosts send today


def _rpc(req_id, method, params=None) -> bytes:
    msg = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if req_id is not None:
        msg["id"] = req_id
    return (json.dumps(msg) + "\n").encode()


def test_stdout_carries_nothing_but_protocol_and_sigterm_ends_the_server(fresh):
    d = fresh()
    d.register("so_ann", "so_role", identity_file=True)
    d.stop()  # serve must start it, and say so on stderr only
    env = {k: v for k, v in os.environ.items() if not k.startswith("THRUM_")}
    proc = subprocess.Popen(
        [THRUM, "mcp", "serve", "--repo", str(d.repo)],
        cwd=str(d.repo),
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        proc.stdin.write(
            _rpc(
                1,
                "initialize",
                {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
            )
        )
        proc.stdin.write(_rpc(None, "notifications/initialized"))
        proc.stdin.write(_rpc(2, "tools/list"))
        proc.stdin.write(_rpc(3, "tools/call", {"name": "check_messages", "arguments": {}}))
        proc.stdin.write(
            _rpc(4, "tools/call", {"name": "send_message", "arguments": {"to": "@so_anm", "content": "x"}})
        )
        proc.stdin.write(_rpc(5, "tools/call", {"name": "wait_for_message", "arguments": {"timeout": 0}}))
        proc.stdin.flush()
        answers = {}
        raw = b""
        while len(answers) < 5:
            line = proc.stdout.readline()
            assert line, f"stdout closed early; stderr: {proc.stderr.read().decode()}"
            raw += line
            msg = json.loads(line)
            assert msg["jsonrpc"] == "2.0" and "id" in msg, line
            answers[msg["id"]] = msg
        # a host that stops the server with SIGTERM while a wait is blocked: a prompt, clean exit
        proc.stdin.write(_rpc(6, "tools/call", {"name": "wait_for_message", "arguments": {"timeout": 60}}))
        proc.stdin.flush()
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rest == b"", f"unexpected stdout after the last answer: {rest!r}"
    assert raw.endswith(b"\n") and b"\n\n" not in raw
    assert proc.returncode == 0, err.decode()
    assert answers[1]["result"]["serverInfo"]["name"] == "thrum"
    assert len(answers[2]["result"]["tools"]) == 13
    assert answers[3]["result"]["structuredContent"] == {"status": "empty", "messages": [], "remaining": 0}
    assert answers[4]["result"]["isError"] is True
    assert "unknown recipient" in answers[4]["result"]["content"][0]["text"]
    assert answers[5]["result"]["structuredContent"]["status"] == "timeout"
    assert "starting daemon" in err.decode()  # the one line it printed went to stderr


def _serve_error(repo: Path, *args: str, env: dict | None = None) -> str:
    proc = run_thrum(repo, "mcp", "serve", *args, env=env, stdin="", timeout=60)
    assert proc.returncode == 1, proc
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("thrum: "), proc.stderr
    return lines[0]


async def test_serve_start_up_resolves_the_identity_or_fails_with_one_clear_line(fresh):
    d = fresh()
    assert "no agent identity in this repository" in _serve_error(d.repo)
    d.register("st_ann", "st_impl", identity_file=True)
    async with mcp_server(d.repo) as only:  # the single identity file, no flag
        sent = await only.call("send_message", {"to": "@everyone", "content": "from the only one"})
    assert d.call("message.get", {"message_id": sent["message_id"]})["message"]["author"]["agent_id"] == "st_ann"
    d.register("st_ben", "st_rev", identity_file=True)
    several = _serve_error(d.repo)
    assert "@st_ann (st_impl, core)" in several and "@st_ben (st_rev, core)" in several and "--agent-id" in several
    async with mcp_server(d.repo, env={"THRUM_NAME": "st_ben"}) as ben:
        sent = await ben.call("send_message", {"to": "@everyone", "content": "from ben"})
    assert d.call("message.get", {"message_id": sent["message_id"]})["message"]["author"]["agent_id"] == "st_ben"
    unknown = _serve_error(d.repo, "--agent-id", "st_zed")
    assert "no identity 'st_zed'" in unknown and "@st_ann" in unknown
    assert "not a valid agent name" in _serve_error(d.repo, "--agent-id", "Bad-Name")
    d.stop()
    down = _serve_error(d.repo, "--agent-id", "st_ann", env={"THRUM_NO_AUTOSTART": "1"})
    assert "cannot reach the thrum daemon" in down and "thrum daemon start" in down


def test_serve_in_a_repository_without_thrum_says_to_run_init(tmp_path):
    make_repo(tmp_path / "plain")
    assert "run `thrum init` first" in _serve_error(tmp_path / "plain")


async def test_an_agent_unknown_to_the_daemon_is_registered_from_its_identity_file(bus):
    from thrum import identity

    identity.write(bus.paths.identities, identity.Identity(name="fc_new", role="fc_role", module="m"))
    async with mcp_server(bus.repo, "fc_new") as me:
        agents = {a["name"]: a for a in (await me.call("list_agents"))["agents"]}
    assert agents["fc_new"]["role"] == "fc_role" and agents["fc_new"]["status"] == "active"


def test_config_prints_a_working_host_configuration(bus):
    d = bus
    d.register("cf_ann", "cf_role", identity_file=True)
    d.register("cf_ben", "cf_rev", identity_file=True)
    out = run_thrum(d.repo, "mcp", "config", "--agent-id", "cf_ann")
    assert out.returncode == 0, out.stderr
    server = json.loads(out.stdout)["mcpServers"]["thrum"]
    assert server["type"] == "stdio" and os.path.isabs(server["command"]) and os.access(server["command"], os.X_OK)
    assert server["args"] == ["mcp", "serve", "--repo", str(d.repo), "--agent-id", "cf_ann"]
    assert out.stderr.startswith("thrum: ")  # where to put it: stderr, so stdout pastes cleanly

    claude_run = run_thrum(d.repo, "mcp", "config", "--agent-id", "cf_ann", "--host", "claude")
    claude = claude_run.stdout.strip()
    # the paths are this machine's: never advise a configuration other machines share (issue 30, item 11)
    assert "--scope project" not in claude_run.stderr and "this machine" in claude_run.stderr
    assert shlex.split(claude) == ["claude", "mcp", "add", "thrum", "--", server["command"], *server["args"]]
    codex = run_thrum(d.repo, "mcp", "config", "--agent-id", "cf_ann", "--host", "codex").stdout.strip()
    assert shlex.split(codex)[:5] == ["codex", "mcp", "add", "thrum", "--"]
    cursor = json.loads(run_thrum(d.repo, "mcp", "config", "--agent-id", "cf_ann", "--host", "cursor").stdout)
    assert cursor["mcpServers"]["thrum"]["args"] == server["args"]

    several = run_thrum(d.repo, "mcp", "config")
    assert several.returncode == 1 and "--agent-id" in several.stderr and "@cf_ben" in several.stderr
    bad = run_thrum(d.repo, "mcp", "config", "--agent-id", "cf_ann", "--host", "vim")
    assert bad.returncode == 2 and "vim" in bad.stderr

    # the printed command really starts the server (from another directory)
    proc = subprocess.run(
        [server["command"], *server["args"]],
        input=b"",
        capture_output=True,
        timeout=60,
        cwd="/",
        env={k: v for k, v in os.environ.items() if not k.startswith("THRUM_")},
    )
    assert proc.returncode == 0 and proc.stdout == b"", proc.stderr


async def test_an_identity_copied_from_another_machine_is_registered_and_answered(fresh):
    """Issue 30, item 2: the identity file's absolute ``worktree`` went to agent.register,
    which refuses paths; the server retried ~18 times a second and never answered."""
    home, other = fresh(name="home"), fresh(name="other")
    made = run_thrum(home.repo, "quickstart", "--name", "mover", "--role", "mover_role")
    assert made.returncode == 0, made.stderr
    assert json.loads((home.paths.identities / "mover.json").read_text())["worktree"].startswith("/")
    other.paths.identities.mkdir(parents=True, exist_ok=True)
    for suffix in (".json", ".key"):  # as a user copies them: the key keeps its mode 0600
        shutil.copy2(home.paths.identities / f"mover{suffix}", other.paths.identities / f"mover{suffix}")
    async with mcp_server(other.repo, "mover") as mover:
        listed = await mover.call("list_agents")
        [me] = [a for a in listed["agents"] if a["name"] == "mover"]
        assert me["role"] == "mover_role" and me["status"] == "active"
    agent = other.call("agent.get", {"name": "mover"})["agent"]
    assert agent["worktree"] == "main"


def test_a_registration_the_daemon_refuses_ends_the_start_up_with_one_line(fresh):
    d = fresh()
    d.register("rf_bob", "rf_reviewer")
    (d.paths.identities / "rf_carl.json").write_text(json.dumps({"name": "rf_carl", "role": "rf_bob"}))
    line = serve_refused(d.repo, "rf_carl")
    assert line.startswith("thrum: cannot serve as @rf_carl: the daemon refused to register it: ")
    assert "@rf_bob" in line
