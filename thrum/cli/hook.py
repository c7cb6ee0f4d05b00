"""``thrum hook HOST EVENT``: listed here for ``thrum --help``; the work is `thrum.hooks.main`.

``thrum hook …`` reaches `thrum.hooks.main` before click loads (`thrum.cli.entry`);
this command serves the other ways in (``thrum --repo X hook …``, ``thrum.cli.main.run``).
"""

from __future__ import annotations

import click


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def hook(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Run by an agent host (Claude Code, Codex, Gemini, Cursor) at its turn boundaries.

    Puts the messages waiting for the agent into its context; see `thrum hook --help`
    and `thrum setup`.
    """
    from ..hooks.main import USAGE, run

    if list(args) in (["--help"], ["-h"]):
        click.echo("Usage: thrum hook" + USAGE[len("usage: thrum hook") :].rstrip("\n"))
        ctx.exit(0)
    root = ctx.find_root().obj
    extra = ["--repo", root.repo] if getattr(root, "repo", None) else []
    ctx.exit(run(list(args) + extra if args else list(args)))
