"""A fake agent host for the wake-up tests: runs in a tmux pane, shows a prompt, writes each line it reads.

``fake_host.py OUT [--thrum PATH --agent NAME --repo DIR] [--answer] [--busy]``

- It starts like a host with hooks: with ``--thrum``, `thrum hook generic start`
  (which records this pane with the daemon). Then it writes ``started`` to OUT,
  prints ``> `` and reads lines forever, appending each one to OUT.
- ``--answer``: it answers a wake-up as a host would: it prints a few lines of work,
  runs its prompt hook (with ``--thrum``: `thrum hook generic prompt`, which shows
  the messages and records them surfaced), then writes ``answered`` to OUT and shows
  its prompt again.
- ``--busy``: an agent at work: it redraws a spinner line above an empty prompt,
  forever, and reads nothing.
"""

import itertools
import subprocess
import sys
import time

out = sys.argv[1]
opts = sys.argv[2:]


def opt(name: str) -> str | None:
    return opts[opts.index(name) + 1] if name in opts else None


thrum, agent, repo = opt("--thrum"), opt("--agent"), opt("--repo")


def hook(event: str) -> None:
    if thrum:
        subprocess.run([thrum, "hook", "generic", event, "--agent", agent, "--repo", repo], stdin=subprocess.DEVNULL)


def note(line: str) -> None:
    with open(out, "a") as f:
        f.write(line + "\n")


hook("start")
note("started")
if "--busy" in opts:
    for n in itertools.count():
        sys.stdout.write(f"\x1b[H\x1b[2J{'⠋⠙⠹⠸'[n % 4]} working ({n})\n> ")
        sys.stdout.flush()
        time.sleep(0.02)
while True:
    try:
        line = input("> ")
    except EOFError:
        break
    note(line)
    if "--answer" in opts and "new thrum message" in line:
        print("⏺ checking thrum")
        hook("prompt")
        print("⏺ done")
        note("answered")
