"""What a ``thrum sync`` passes along to the daemon, and what the daemon keeps of it.

``thrum sync`` sends the login-related variables of its shell with ``sync.run``
(`thrum.config.FORWARDED_ENV`); the daemon keeps them in memory for its automatic
cycles (never on disk). Merged per kind of login (`remember_forwarded`): a
``thrum sync`` that carries no credentials (another shell, cron) never logs the
daemon out. No pygit2, no trio.
"""

from __future__ import annotations

import os
import stat

__all__ = ["is_socket", "remember_forwarded"]


def is_socket(path: str) -> bool:
    """True when ``path`` is a Unix socket (an ssh-agent that is still there)."""
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def remember_forwarded(kept: dict[str, str], given: dict[str, str]) -> dict[str, str]:
    """What the daemon keeps after a ``thrum sync`` passed ``given`` along, having kept ``kept``.

    Per kind of login, so that a ``thrum sync`` carrying no credentials never wipes
    what an earlier one gave:

    - ``THRUM_GIT_TOKEN`` and ``THRUM_GIT_USERNAME`` go together: a token given replaces
      the pair (the username given with it, or none); without a token the kept pair
      stays (a username alone is taken only when no token is kept: it names no login).
    - ``SSH_AUTH_SOCK``: an agent given replaces the kept one, unless it is not a live
      socket while the kept one is.
    - Every other variable (``THRUM_SSH_KEY``, ``GH_TOKEN`` and the other forges' tokens,
      where git's credential helpers look: ``GIT_CONFIG_GLOBAL``, ``XDG_CONFIG_HOME``,
      ``DBUS_SESSION_BUS_ADDRESS``) is replaced when given and kept otherwise.

    Nothing is dropped but by a replacement: restarting the daemon forgets it all.
    """
    given = {k: v for k, v in given.items() if isinstance(v, str) and v}
    out = dict(kept)
    pair = ("THRUM_GIT_TOKEN", "THRUM_GIT_USERNAME")
    if "THRUM_GIT_TOKEN" in given:
        for name in pair:
            out.pop(name, None)
            if name in given:
                out[name] = given[name]
    elif "THRUM_GIT_USERNAME" in given and "THRUM_GIT_TOKEN" not in kept:
        out["THRUM_GIT_USERNAME"] = given["THRUM_GIT_USERNAME"]
    sock = given.get("SSH_AUTH_SOCK")
    if sock and (is_socket(sock) or not is_socket(kept.get("SSH_AUTH_SOCK") or "")):
        out["SSH_AUTH_SOCK"] = sock
    for name, value in given.items():
        if name not in pair and name != "SSH_AUTH_SOCK":
            out[name] = value
    return out
