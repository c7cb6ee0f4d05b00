"""``python -m thrum.daemon --repo PATH [--ready-fd N] [--foreground]``."""

import argparse
import sys

from ..paths import resolve


def _main() -> int:
    parser = argparse.ArgumentParser(prog="thrum-daemon")
    parser.add_argument("--repo", default=".")
    parser.add_argument("--ready-fd", type=int, default=None)
    parser.add_argument("--foreground", action="store_true")
    args = parser.parse_args()
    from .process import main

    return main(resolve(args.repo, check=False), ready_fd=args.ready_fd, foreground=args.foreground)  # checked in main


if __name__ == "__main__":
    sys.exit(_main())
