"""Write tests/file_seconds.json (each test file's seconds: setup, call and teardown of its
tests) from the output of a whole run with ``--durations=0``, e.g.

    scripts/test -q --durations=0 > /tmp/run.txt; .venv/bin/python scripts/file_seconds.py /tmp/run.txt

tests/conftest.py starts the longest files first from it; only the order depends on it.
Take it from a quiet machine's run, or any run: the order needs proportions, not times.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

LINE = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(\S+?\.py)::")
OUT = Path(__file__).resolve().parent.parent / "tests" / "file_seconds.json"


def main(path: str) -> None:
    seconds: Counter[str] = Counter()
    for line in Path(path).read_text().splitlines():
        m = LINE.match(line.strip())
        if m:
            seconds[m[2]] += float(m[1])
    if not seconds:
        raise SystemExit(f"{path}: no durations (run the suite with --durations=0)")
    OUT.write_text(json.dumps({f: round(s, 1) for f, s in sorted(seconds.items())}, indent=0) + "\n")
    print(f"{OUT}: {len(seconds)} files, {sum(seconds.values()):.0f} s")


if __name__ == "__main__":
    main(*sys.argv[1:])
