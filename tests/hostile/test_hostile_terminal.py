"""What a teammate writes never steers the reader's terminal (issue 31, finding 14).

C0 and C1 controls were already shown escaped; Unicode's bidirectional controls were
not: ``\\u202e`` (right-to-left override) makes ``invoice\\u202efdp.exe`` read as
``invoiceexe.pdf``, and the isolates and embeddings reorder whatever follows them.
"""

from __future__ import annotations

from hostile_helpers import team_with_history

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u2028\u2029"


def test_bidirectional_controls_are_shown_escaped(team):
    t, a, b = team_with_history(team)
    sent = b.json("send", "open invoice\u202efdp.exe now \u2067tail\u2069", "--to", "@alice", agent="bob")
    b.sync()
    a.sync()
    for args in (("inbox",), ("message", "get", sent["message_id"])):
        out = a.run(*args, agent="alice").stdout
        assert not set(out) & set(BIDI), args
        assert "\\u202e" in out, args
