"""README.md's shell blocks, run as written (issue 30, item 1).

Every ```bash / ```sh block of the README is run by bash, each command line checked
on its own: a command that exits non-zero fails the test with the README line it
is on (``a && b`` fails when ``a`` does: that is how the README's own
``thrum send … && thrum sync`` went unnoticed). Which situation a block is read in
is decided by the section it is in (`SECTIONS`); a shell block in a section this
test does not know fails the test, so whoever adds one decides.

What the test provides, and nothing else:

- a fresh git repository named ``your-repo`` (the README's ``cd your-repo``);
- the README's GitHub URLs lead to local bare repositories, through git's own
  ``url.<base>.insteadOf`` in the HOME the commands run with (libgit2 honours it
  too), so ``git clone git@github.com:team/project.git`` works offline;
- a ``claude`` command that records its arguments (the README's ``eval "$(thrum mcp
  config --host claude)"`` runs ``claude mcp add …``; the test checks what it got);
- ``BROWSER=true`` (``thrum ui --open`` opens "a browser" that exits at once), and
  ports chosen by the system (``THRUM_WS_PORT=0``, ``THRUM_UI_PORT=0``) so suites
  running side by side never collide.

One line is not run: ``scripts/test`` (it runs the whole suite, this test included).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pygit2
import pytest

from fixtures.repos.builders import make_bare, make_repo

pytestmark = pytest.mark.long_file  # a minute and more under load: started first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
THRUM = shutil.which("thrum") or str(Path(sys.executable).parent / "thrum")
SHELLS = ("bash", "sh", "shell")
TIMEOUT = 300

PROJECT_URL = "git@github.com:team/project.git"
LOG_URL = "git@github.com:team/project-thrum-log.git"

# Where each section's blocks run: "checkout" (this thrum checkout), "reader" (one shell
# following the README in a fresh repository, block after block), "machines" (each
# "# machine X" part on a machine of its own), "fresh clone" (a clone nobody set up),
# "name conflict" (the machine that registered a name second, while offline).
SECTIONS = {
    "Quick start": "checkout",
    "Using it": "reader",
    "Several machines: sync through any git remote": "machines",
    "One name on two machines": "name conflict",
    "A dedicated remote for the log": "fresh clone",
    "Agents in Claude Code / Codex / Gemini": "reader",
    "Agents in MCP hosts (Claude Code, Codex, Cursor, …)": "reader",
    "Using thrum as Gas City's mail": "reader",
    "Watch and steer from a browser: `thrum ui`": "reader",
}
NOT_RUN = {"scripts/test": "it runs the whole suite, this test included"}


@dataclass
class Block:
    section: str
    line: int  # README line of the block's first command line
    lines: list[str]


def shell_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    section = ""
    fence: str | None = None
    body: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        if fence is None:
            if line.startswith("```"):
                fence = line[3:].strip()
                body, start = [], number + 1
            elif line.startswith("#"):
                section = line.lstrip("#").strip()
        elif line.startswith("```"):
            if fence in SHELLS:
                blocks.append(Block(section, start, body))
            fence = None
        else:
            body.append(line)
    return blocks


def checked_script(block: Block, first: int = 0, count: int | None = None) -> str:
    """The block's lines (``first`` on, ``count`` of them) with a check after every command:
    the script stops at the first one that exits non-zero, naming its README line."""
    out = []
    lines = block.lines[first : None if count is None else first + count]
    for offset, line in enumerate(lines):
        number = block.line + first + offset
        command = line.strip()
        if not command or command.startswith("#"):
            continue
        out.append(line)
        out.append(
            "__rc=$?; if [ $__rc -ne 0 ]; then "
            f"echo {shlex.quote(f'README.md:{number}: exit ')}$__rc{shlex.quote(f': {command}')} >&2; exit 1; fi"
        )
    return "\n".join(out) + "\n"


def run_script(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, f"{proc.stderr.strip()}\n--- stdout:\n{proc.stdout}"
    return proc


class World:
    """The machines, homes and remotes the README's commands run against."""

    def __init__(self, base: Path):
        self.base = base
        self.remotes = base / "remotes"
        self.remotes.mkdir()
        self.project = self.remotes / "project.git"
        make_bare(self.project, with_commit=True)
        self.log_remote = self.remotes / "project-thrum-log.git"
        make_bare(self.log_remote)
        self.bin = base / "bin"
        self.bin.mkdir()
        self.claude_calls = base / "claude-calls"
        stub = self.bin / "claude"
        stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {shlex.quote(str(self.claude_calls))}\n')
        stub.chmod(0o755)

    def machine(self, name: str) -> tuple[Path, dict]:
        """A directory to start in and the environment of a machine of its own."""
        where = self.base / name
        home = where / "home"
        home.mkdir(parents=True)
        (home / ".gitconfig").write_text(
            "[user]\n\tname = README Reader\n\temail = reader@example.invalid\n"
            f'[url "{self.project}"]\n\tinsteadOf = {PROJECT_URL}\n'
            f'[url "{self.log_remote}"]\n\tinsteadOf = {LOG_URL}\n'
            "[init]\n\tdefaultBranch = main\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("THRUM_", "GIT_"))}
        env.update(
            HOME=str(home),
            PATH=os.pathsep.join([str(Path(THRUM).parent), str(self.bin), env.get("PATH", "")]),
            BROWSER="true",
            COLUMNS="100",
            THRUM_WS_PORT="0",
            THRUM_UI_PORT="0",
        )
        return where, env

    def stop_daemons(self) -> None:
        for var in self.base.rglob(".thrum"):
            subprocess.run([THRUM, "daemon", "stop"], cwd=var.parent, capture_output=True, timeout=60)


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path)
    yield w
    w.stop_daemons()


@pytest.fixture(scope="module")
def blocks() -> list[Block]:
    found = shell_blocks(README.read_text())
    unknown = sorted({b.section for b in found} - set(SECTIONS))
    assert not unknown, f"README has shell blocks in sections this test does not know: {unknown}; add them to SECTIONS"
    return found


def in_section(blocks: list[Block], kind: str) -> list[Block]:
    return [b for b in blocks if SECTIONS[b.section] == kind]


def test_every_section_with_a_shell_block_is_run(blocks):
    assert {SECTIONS[b.section] for b in blocks} == {"checkout", "reader", "machines", "fresh clone", "name conflict"}


def test_quick_start_runs_in_this_checkout(blocks):
    [block] = in_section(blocks, "checkout")
    runnable = [line for line in block.lines if line.split("#")[0].strip() not in NOT_RUN]
    assert len(runnable) < len(block.lines), "scripts/test is no longer in the Quick start block: update NOT_RUN"
    out = run_script(checked_script(Block(block.section, block.line, runnable)), ROOT, dict(os.environ)).stdout
    assert "bob" in out or "alice" in out  # the demo's agents spoke


def test_a_reader_following_the_readme_in_a_fresh_repository(blocks, world):
    start, env = world.machine("reader")
    make_repo(start / "your-repo")
    script = "".join(checked_script(b) for b in in_section(blocks, "reader"))
    out = run_script(script, start, env).stdout
    assert "Auth module complete" in out  # bob, the first reviewer, found it in `inbox --mentions`
    assert "Looks good, merging now" in out.split("backend", 1)[-1]  # alice's wait printed bob's reply
    calls = world.claude_calls.read_text().splitlines()
    assert calls == ["mcp", "add", "thrum", "--", THRUM, *_serve_args(start / "your-repo", "alice")]


def _serve_args(repo: Path, agent: str) -> list[str]:
    return ["mcp", "serve", "--repo", str(repo.resolve()), "--agent-id", agent]


def test_two_machines_as_the_readme_shows_them(blocks, world):
    [block] = in_section(blocks, "machines")
    parts = [i for i, line in enumerate(block.lines) if re.match(r"# machine [A-Z]\b", line)]
    assert len(parts) == 2, "the README's machines are marked '# machine A' and '# machine B'"
    outputs = []
    for n, (first, end) in enumerate(zip(parts, parts[1:] + [len(block.lines)])):
        start, env = world.machine(f"machine-{n}")
        outputs.append(run_script(checked_script(block, first, end - first), start, env).stdout)
    assert "API ready" in outputs[1]  # bob on machine B got what alice sent before anyone was a reviewer


def test_a_dedicated_remote_for_the_log(blocks, world):
    [block] = in_section(blocks, "fresh clone")
    start, env = world.machine("dedicated")
    subprocess.run(["git", "clone", "-q", PROJECT_URL, "project"], cwd=start, env=env, check=True)
    repo = start / "project"
    run_script(checked_script(block), repo, env)
    run_script("thrum sync --quiet\n", repo, env)
    assert pygit2.Repository(str(world.log_remote)).references.get("refs/heads/a-sync") is not None
    assert pygit2.Repository(str(world.project)).references.get("refs/heads/a-sync") is None


def test_giving_a_name_up_as_the_readme_says_ends_a_name_conflict(blocks, world):
    """Two machines register alice while offline; the README's steps, run on the one that
    registered second, end the conflict there and let its new name hear the first alice."""
    [block] = in_section(blocks, "name conflict")
    clones = []
    for n in range(2):
        start, env = world.machine(f"conflict-{n}")
        env.update(THRUM_SYNC_INTERVAL="3600", THRUM_SYNC_DEBOUNCE="3600")  # offline: no sync of their own
        subprocess.run(["git", "clone", "-q", PROJECT_URL, "project"], cwd=start, env=env, check=True)
        repo = start / "project"
        run_script("thrum init >/dev/null && thrum quickstart --name alice --role implementer >/dev/null\n", repo, env)
        clones.append((repo, env))
    (a, a_env), (b, b_env) = clones
    run_script('thrum send "from a" --to @everyone >/dev/null && thrum sync --quiet\n', a, a_env)
    run_script('thrum send "from b" --to @everyone >/dev/null\n', b, b_env)
    failed = subprocess.run([THRUM, "sync"], cwd=b, env=b_env, capture_output=True, text=True, timeout=TIMEOUT)
    assert failed.returncode == 1 and "registered there first" in failed.stderr, failed.stderr

    run_script(checked_script(block), b, b_env)  # the README's steps, on b; its last line is a passing sync

    run_script('thrum send "still me" --to @alice2 >/dev/null; thrum sync --quiet; true\n', a, a_env)
    run_script("thrum sync --quiet\n", b, b_env)
    inbox = run_script("thrum inbox --mentions --json --name alice2\n", b, b_env).stdout
    assert "still me" in inbox and "from a" in inbox
    doctor = subprocess.run([THRUM, "doctor"], cwd=b, env=b_env, capture_output=True, text=True, timeout=TIMEOUT)
    assert doctor.returncode == 0, doctor.stdout
