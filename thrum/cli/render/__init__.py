"""Pure text rendering for the CLI: RPC results in, strings out.

No I/O, no click, no daemon: every function takes the data and (where it
matters) ``now`` and ``width``, so tests can compare exact strings. Every view
keeps two rules:

1. Empty states are the spec's exact texts.
2. Text from messages is untrusted: control characters (terminal escapes) are
   made visible, never written raw (`text.clean`).

One module per kind of view, over two shared ones:

- `text`: the small pieces (clean, times, widths, padding, tables);
- `fields`: reading a message out of a reply, whatever shape the reply gives it;
- `messages`: the inbox, threads, one message, sent messages;
- `search`: search results (the inbox's box, with snippets);
- `directory`: agents, identities, sessions, groups and their members;
- `status`: the daemon's status.

The package re-exports nothing: a caller imports the view from its module
(``from thrum.cli.render.messages import render_inbox``), so a name's home is
where the import says.
"""
