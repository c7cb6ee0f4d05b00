"""``thrum gc-mail <op> [arg]``: the Gas City mail provider (`thrum.gcmail`) under the thrum command.

Gas City runs the ``thrum-gc-mail`` executable itself (``GC_MAIL=exec:thrum-gc-mail``);
this command is the same program for people and scripts, honouring ``--repo``.
"""

from __future__ import annotations

import click

from .common import options


@click.command(
    "gc-mail",
    add_help_option=False,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def gc_mail(args: tuple[str, ...]) -> None:
    """Gas City's exec mail provider: thrum gc-mail <operation> [argument] (see thrum gc-mail --help)."""
    from ..gcmail.main import USAGE, run

    if not args or args[0] in ("-h", "--help"):
        click.echo(
            USAGE.replace(
                "usage: thrum-gc-mail <operation> [argument]", "Usage: thrum gc-mail OPERATION [ARGUMENT]", 1
            ).rstrip("\n")
        )
        return
    argv, repo = _repo_option(list(args))
    code = run(argv, repo=repo or options().repo)  # the process's own stdin, stdout and stderr
    click.get_current_context().exit(code)


def _repo_option(args: list[str]) -> tuple[list[str], str | None]:
    """``--repo R`` (or ``--repo=R``) given after the operation, as people type it; an
    operation takes at most one argument, so nothing else there can start with --repo."""
    rest: list[str] = []
    repo = None
    i = 0
    while i < len(args):
        arg = args[i]
        if i > 0 and arg == "--repo" and i + 1 < len(args):
            repo, i = args[i + 1], i + 2
            continue
        if i > 0 and arg.startswith("--repo="):
            repo = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return rest, repo
