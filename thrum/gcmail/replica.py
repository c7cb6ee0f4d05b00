"""This machine's replica tag: what tells its Gas City agents from other machines'.

An agent's key stays on the machine that registered it, so each machine acts for
an address through its own agent, named with this tag (thrum.gcmail.addresses,
rule 4). The tag is 8 random base32 characters kept in ``.thrum/gc-mail.replica``,
made once by whichever provider process gets there first.
"""

from __future__ import annotations

import os

from .addresses import TAG_RE

FILE = "gc-mail.replica"


def replica_tag(thrum_dir: str | os.PathLike[str]) -> str:
    """The tag kept in ``thrum_dir``, made now if there is none (or it is unreadable)."""
    path = os.path.join(os.fspath(thrum_dir), FILE)
    for _ in range(2):
        try:
            with open(path, encoding="ascii") as fh:
                tag = fh.read().strip()
            if TAG_RE.fullmatch(tag):
                return tag
            os.unlink(path)  # damaged: make a new one (this machine's agents get new names)
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        import base64

        tag = base64.b32encode(os.urandom(5)).decode("ascii").lower()
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="ascii") as fh:
            fh.write(tag + "\n")
        try:
            os.link(tmp, path)  # atomic, and fails when another process was first
            return tag
        except FileExistsError:
            continue
        finally:
            os.unlink(tmp)
    raise OSError(f"cannot make the replica tag in {path}")
