"""A fake agent host for the wake-up tests: runs in a tmux pane, shows a prompt, writes each line it reads.

It starts like a host with hooks: `thrum hook generic start --agent NAME` (which
records this pane with the daemon), then prints ``> `` and reads lines forever,
appending each one to OUT.
"""

import subprocess
import sys

out, thrum, agent, repo = sys.argv[1:5]
subprocess.run([thrum, "hook", "generic", "start", "--agent", agent, "--repo", repo], stdin=subprocess.DEVNULL)
with open(out, "a") as f:
    f.write("started\n")
while True:
    try:
        line = input("> ")
    except EOFError:
        break
    with open(out, "a") as f:
        f.write(line + "\n")
