"""The ``thrum`` executable: `thrum hook` goes straight to its fast path, the rest to the CLI.

Hosts run ``thrum hook HOST EVENT`` on every prompt and tool call, so it must not
pay for click and the command registry (`thrum.hooks.main`). Every other command
is `thrum.cli.main`.
"""

from __future__ import annotations

import gc
import sys


def main() -> None:
    # Each branch freezes what its imports made (gc.freeze): the collector then never scans
    # it, nor does the interpreter's exit (~5 ms of a call's ~55 ms of CPU). Nothing is open yet.
    if sys.argv[1:2] == ["hook"]:
        from ..hooks.main import run

        gc.freeze()
        sys.exit(run(sys.argv[2:]))
    from .main import main as cli_main

    gc.freeze()
    cli_main()
