"""The ``thrum`` executable: `thrum hook` goes straight to its fast path, the rest to the CLI.

Hosts run ``thrum hook HOST EVENT`` on every prompt and tool call, so it must not
pay for click and the command registry (`thrum.hooks.main`). Every other command
is `thrum.cli.main`.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        from ..hooks.main import run

        sys.exit(run(sys.argv[2:]))
    from .main import main as cli_main

    cli_main()
