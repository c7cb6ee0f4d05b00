"""The three-column table (what, figure, target) every benchmark script prints."""

from __future__ import annotations

from collections.abc import Sequence


def print_table(
    rows: Sequence[tuple[str, str, str]],
    *,
    title: str | None = None,
    head: tuple[str, str] = ("benchmark", "result"),
    indent: str = "",
) -> None:
    """Print ``rows`` under ``title``, names left-aligned and figures right-aligned, each
    column as wide as its widest cell, so figures line up for reading and for diffing runs."""
    if title is not None:
        print(title)
    width = max([len(head[0])] + [len(r[0]) for r in rows])
    vwidth = max([len(head[1])] + [len(r[1]) for r in rows])
    print(f"{indent}{head[0].ljust(width)}  {head[1].rjust(vwidth)}  target")
    for name, value, target in rows:
        print(f"{indent}{name.ljust(width)}  {value.rjust(vwidth)}  {target}".rstrip())
