"""``thrum-gc-mail <op> [arg]``: Gas City's exec mail provider, as Gas City runs it.

Gas City (``GC_MAIL=exec:thrum-gc-mail``) starts this program for every mail
operation and its hooks run ``check`` on every prompt, so start-up is the cost:
this module imports only the RPC client and path finding (no click, no trio, no
pygit2); starting or setting up the daemon (`thrum.gcmail.startup`) is imported
only when the daemon does not answer.

Rules (docs: spec/gascity-exec-provider.md):

1. argv[1] is the operation, argv[2] its one argument, verbatim. ``send`` and
   ``reply`` read one JSON object from stdin; nothing else reads stdin.
2. Exit 0 with one JSON document (or nothing) on stdout; exit 2 only for an
   unknown operation (Gas City reads it as "success, nothing to say"); any
   failure exits 1 with one line on stderr. An unknown message id carries the
   marker ``gc-mail-error:not-found``; archiving twice says ``already archived``.
3. The repository is ``THRUM_REPO``, else the working directory's. A git
   repository without thrum is set up on first use, and the daemon is started
   when it does not answer.
"""

from __future__ import annotations

import os
import sys

from .. import errors
from ..client import Client
from ..paths import NotARepository, ThrumPaths, resolve
from . import protocol
from .addresses import AddressError
from .provider import AlreadyArchived, Mailer, NotFoundError

TYPE_CHECKING = False  # typing is not imported: the provider's start-up budget (mypy reads this as True)
if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from typing import Any, BinaryIO, TextIO

PROG = "thrum-gc-mail"
NOT_FOUND_MARKER = "gc-mail-error:not-found"
CALL_TIMEOUT = 25.0  # Gas City kills a call after 30 s

# operation -> (takes an argument, reads stdin)
OPERATIONS = {
    "ensure-running": (False, False),
    "send": (True, True),
    "inbox": (True, False),
    "check": (True, False),
    "all": (True, False),
    "get": (True, False),
    "read": (True, False),
    "mark-read": (True, False),
    "mark-unread": (True, False),
    "archive": (True, False),
    "delete": (True, False),
    "reply": (True, True),
    "thread": (True, False),
    "count": (True, False),
}

USAGE = f"""usage: {PROG} <operation> [argument]

Gas City's exec mail provider on thrum: set GC_MAIL=exec:{PROG}
(THRUM_REPO names the repository; default: the working directory's).

  ensure-running             set up thrum and start its daemon when needed
  send TO                    stdin {{"from", "subject", "body"}}; prints the new message
  inbox|check|all RECIPIENT  unread (inbox, check) or all un-archived messages
  count RECIPIENT            {{"total": N, "unread": M}}
  get|read ID                one message (read also marks it read)
  mark-read|mark-unread ID
  archive|delete ID          out of the mailbox views
  reply ID                   stdin as for send; to the parent's sender, same thread
  thread ID                  a thread (by thread id or any message id), oldest first
"""


class Connection:
    """``rpc(method, params)`` over one daemon connection, made on first use
    (setting up thrum and starting the daemon when it does not answer)."""

    def __init__(self, paths: ThrumPaths):
        self.paths = paths
        self._client: Client | None = None
        self._tag: str | None = None

    def __call__(self, method: str, params: dict[str, Any]) -> Any:
        if self._client is None:
            self._client = self._connect()
        return self._client.call(method, params)

    def _connect(self) -> Client:
        try:
            return Client(self.paths, timeout=CALL_TIMEOUT).connect()
        except errors.Unavailable:
            pass
        from .startup import ensure

        self.paths = ensure(self.paths)
        return Client(self.paths, timeout=CALL_TIMEOUT).connect()

    def tag(self) -> str:
        """This machine's replica tag (thrum.gcmail.replica), once thrum is set up here."""
        if self._tag is None:
            if self._client is None:
                self._client = self._connect()
            from .replica import replica_tag

            self._tag = replica_tag(self.paths.thrum_dir)
        return self._tag

    def registering(self) -> AbstractContextManager[None]:
        """A lock held while registering an agent (`thrum.gcmail.startup.locked`)."""
        from .startup import locked

        return locked(self.paths.var / "gc-mail.register.lock")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def repository(repo: str | None = None) -> ThrumPaths:
    """The paths of the repository holding the mail (``repo``, ``THRUM_REPO``, or the working directory).

    The working directory's repository is used only when it was set up for Gas City
    mail before (``.thrum/gc-mail.replica``, made the first time a call named the
    repository): otherwise a provider run from inside some unrelated checkout would set
    thrum up there and send the city's mail to that repository's remote (issue 31).

    Raises:
        ThrumError: no repository there, or one never set up for Gas City mail.
    """
    from .replica import FILE, replica_tag

    where = repo or os.environ.get("THRUM_REPO") or None
    try:
        paths = resolve(where)
    except NotARepository as exc:
        raise errors.ThrumError(f"{exc.message}; set THRUM_REPO to the git repository that holds the mail") from None
    marked = os.path.isfile(os.path.join(paths.thrum_dir, FILE))
    if where is None and not marked:
        raise errors.ThrumError(
            f"THRUM_REPO is not set and {paths.repo} (the working directory's repository) was never set up "
            f"for Gas City mail; set THRUM_REPO to the city's repository"
        )
    if where is not None and not marked and paths.initialized:
        replica_tag(paths.thrum_dir)  # named on purpose: from now on, the working directory may find it
    return paths


def dispatch(op: str, arg: str | None, mailer: Mailer, conn: Connection, stdin: BinaryIO) -> object:
    """Run one operation; returns what to print (None or [] print nothing)."""
    if op == "ensure-running":
        from .startup import ensure

        conn.paths = ensure(conn.paths)
        return None
    if op in ("send", "reply"):
        assert arg is not None  # both take one argument (OPERATIONS)
        payload = stdin.read()
        return mailer.send(arg, payload) if op == "send" else mailer.reply(arg, payload)
    return getattr(mailer, op.replace("-", "_"))(arg)


def _say(stream: TextIO, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except OSError:
        pass


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip()) or "error"


def _bytes_of(stream: Any) -> BinaryIO:
    """The byte stream under a text one (itself when it has none: a test's stand-in)."""
    binary: BinaryIO = getattr(stream, "buffer", stream)
    return binary


def run(
    argv: list[str],
    *,
    repo: str | None = None,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run ``argv`` (without the program name) and return the exit status."""
    stdin = stdin if stdin is not None else _bytes_of(sys.stdin)
    stdout = stdout if stdout is not None else _bytes_of(sys.stdout)
    stderr = stderr if stderr is not None else sys.stderr

    def fail(message: str, code: int = 1) -> int:
        _say(stderr, f"{PROG}: {_one_line(message)}\n")
        return code

    if not argv or argv[0] in ("-h", "--help", "help"):
        _say(sys.stdout, USAGE.replace("usage: ", "Usage: ", 1))
        return 0
    op, args = argv[0], argv[1:]
    if op not in OPERATIONS:
        return fail(f"unknown operation {op!r} (see {PROG} --help)", 2)
    takes_arg = OPERATIONS[op][0]
    if len(args) != (1 if takes_arg else 0):
        what = "one argument" if takes_arg else "no argument"
        return fail(f"{op} takes {what}, got {len(args)}")
    conn = None
    try:
        conn = Connection(repository(repo))
        doc = dispatch(op, args[0] if args else None, Mailer(conn, conn.tag, conn.registering), conn, stdin)
        out = protocol.dumps(doc)
        if out:
            stdout.write(out + b"\n")
            stdout.flush()
        return 0
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except BrokenPipeError:
        return 1
    except Exception as exc:  # never a traceback in Gas City's error line
        return fail(_error_line(exc))
    finally:
        if conn is not None:
            conn.close()


def _error_line(exc: Exception) -> str:
    """What Gas City's error line says of ``exc`` (called while handling it)."""
    if isinstance(exc, NotFoundError):
        return f"{NOT_FOUND_MARKER}: {exc.message}"
    if isinstance(exc, AlreadyArchived):
        return exc.message
    if isinstance(exc, (AddressError, protocol.PayloadError)):
        return str(exc)
    if isinstance(exc, errors.ThrumError):
        return exc.message or str(exc)
    from ..envflags import DEBUG, flag

    if flag(DEBUG):
        import traceback

        traceback.print_exc()
    return f"internal error: {type(exc).__name__}: {exc}"


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":  # pragma: no cover
    main()
