"""Run the thrum daemon and SIGKILL it at one point of its next sync (test-side fault injection).

    python crash_daemon.py POINT --repo PATH

POINT is ``before:NAME`` or ``after:NAME`` for a method NAME of
`thrum.sync.replicate.Replicator`, optionally ``:WORD`` to fire only when the
call's arguments mention WORD (``before:_move_ref:merge`` kills a merge after its
files are written, before its commit is recorded). The real code runs; the
process just dies where a power cut or an OOM kill could stop it.
"""

from __future__ import annotations

import os
import signal
import sys


def arm(point: str) -> None:
    from thrum.sync import replicate

    when, name, *word = point.split(":")
    original = getattr(replicate.Replicator, name)

    def did_something(result) -> bool:
        if name == "commit_pending":
            return bool(result)
        if name == "merge":
            return bool(result.received or result.commits or result.fast_forward)
        return True

    def wrapped(self, *args, **kwargs):
        mentioned = not word or any(word[0] in str(a) for a in args)
        if when == "before" and mentioned:
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(self, *args, **kwargs)
        if when == "after" and mentioned and did_something(result):
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(replicate.Replicator, name, wrapped)


if __name__ == "__main__":
    arm(sys.argv.pop(1))
    from thrum.daemon.__main__ import _main

    sys.exit(_main())
