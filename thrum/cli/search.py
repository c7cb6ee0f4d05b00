"""``thrum search QUERY``: message.search, rendered in the inbox's style with snippets.

The query is every argument joined by spaces (``thrum search from:alice auth``);
a word that starts with ``-`` excludes it (``thrum search auth -flaky``): only an
argument that is exactly one of the command's options (``--json``, ``-q``,
``--page-size 5``, ``--as=bob``) is taken as one, every other is a query word
(`QueryWords`), so ``-quick`` is not ``-q``. Search reads; it marks nothing read.
"""

from __future__ import annotations

import shlex
import shutil

import click

from .common import CONTEXT_SETTINGS, global_options, identity_option, runtime
from .render.messages import DEFAULT_WIDTH


class QueryWords(click.Command):
    """A command whose arguments are query words unless one is exactly an option of it (see the module)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        takes_value: dict[str, bool] = {}
        for param in self.get_params(ctx):  # (with --help)
            if isinstance(param, click.Option):
                for name in param.opts + param.secondary_opts:
                    takes_value[name] = not param.is_flag
        options: list[str] = []
        words: list[str] = []
        rest = iter(args)
        for arg in rest:
            if arg == "--":
                words.extend(rest)
                break
            name = arg.split("=", 1)[0] if arg.startswith("--") else arg
            if name in takes_value:
                options.append(arg)
                if takes_value[name] and "=" not in arg:
                    options.append(next(rest, ""))
            else:
                words.append(arg)
        return super().parse_args(ctx, options + ["--", *words] if words else options)


@click.command(cls=QueryWords, context_settings=CONTEXT_SETTINGS)
@click.argument("words", nargs=-1, required=True, metavar="QUERY")
@click.option("--archived", is_flag=True, help="Search only the messages you archived (like is:archived).")
@click.option("--page-size", type=click.IntRange(1, 100), default=10, show_default=True, help="Results per page.")
@click.option("--page", type=click.IntRange(1, None), default=1, show_default=True, help="Page number.")
@identity_option("--as")
@global_options()
def search(words: str, archived: bool, page_size: int, page: int) -> None:
    """Find messages by their words, best matches first, with the text around each hit.

    \b
    QUERY: words (all must match; an_identifier, dotted.name or a/path.py is
    found whole and by its parts), "a phrase", pref* (words starting so),
    -word (without it), and filters:
      from:NAME  from:me          the author
      to:NAME  to:@ROLE  to:me    whom it reaches (names, roles, groups, @everyone)
      scope:TYPE:VALUE  ref:TYPE:VALUE
      in:THREAD_ID                a thread (or in:MSG_ID: that message's thread)
      is:unread  is:archived      your unread / your archived messages
      priority:high               low, normal, high or critical
      after:2026-03-01  before:2026-03-08T12:00  after:3d   (dates in UTC)
    It searches what your inbox shows: messages not deleted, not archived by you
    (your own included). Ranked by relevance, recent messages first among equals.

    \b
    Examples:
      thrum search flaky test
      thrum search '"auth token"' from:alice after:7d
      thrum search parse_config -deprecated
      thrum search to:@reviewer is:unread scope:module:auth
    """
    rt = runtime()
    query = " ".join(words)
    params = {"query": query, "page": page, "page_size": page_size}
    if archived:
        params["archived"] = True
    result = rt.agent_call("message.search", params)

    def text() -> str:
        from .render.search import render_search

        width = shutil.get_terminal_size((DEFAULT_WIDTH + 2, 24)).columns - 2
        return render_search(result, query=query, width=width)

    rt.emit(result, text)
    if (result.get("total_pages") or 1) > page and result.get("messages"):
        flags = " ".join(f"--{k} {shlex.quote(v)}" for k, v in rt.context_flags())
        more = f" --page-size {page_size}" if page_size != 10 else ""
        more += " --archived" if archived else ""
        rt.hint(f"Next page: thrum search {shlex.quote(query)} --page {page + 1}{more}{' ' + flags if flags else ''}")
