"""A fake agent host for the wake-up tests: runs in a tmux pane, shows a prompt, writes each line it reads.

It starts like a host with hooks: `thrum hook generic start --agent NAME` (which
records this pane with the daemon), then prints ``> `` and reads lines forever,
appending each one to OUT. With ``--answer`` it also answers a wake-up as a host
would, a moment later: it runs its prompt hook (which shows the messages).
"""

import subprocess
import sys
import time

out, thrum, agent, repo = sys.argv[1:5]
answer = "--answer" in sys.argv[5:]
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
    if answer and "new thrum message" in line:
        time.sleep(1.5)  # a turn takes a while; the answer comes after it
        subprocess.run([thrum, "hook", "generic", "prompt", "--agent", agent, "--repo", repo], stdin=subprocess.DEVNULL)
