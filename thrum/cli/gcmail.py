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
def gc_mail(args):
    """Gas City's exec mail provider: thrum gc-mail <operation> [argument] (see thrum gc-mail --help)."""
    from ..gcmail.main import USAGE, run

    if not args or args[0] in ("-h", "--help"):
        click.echo(
            USAGE.replace(
                "usage: thrum-gc-mail <operation> [argument]", "Usage: thrum gc-mail OPERATION [ARGUMENT]", 1
            ).rstrip("\n")
        )
        return
    code = run(
        list(args),
        repo=options().repo,
        stdin=click.get_binary_stream("stdin"),
        stdout=click.get_binary_stream("stdout"),
        stderr=click.get_text_stream("stderr"),
    )
    click.get_current_context().exit(code)
