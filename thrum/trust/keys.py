"""Ed25519 key pairs of agents, and the private key files beside their identities.

Rules:

1. A private key lives in ``.thrum/identities/{name}.key`` (PEM, PKCS#8, mode 0600),
   created once, never overwritten: losing it means the agent cannot sign any more,
   replacing it silently would make every other replica refuse the agent.
   It is used only when it is a regular file (read without following a link) owned
   by the user, with mode 0600, and not tracked by git (`thrum.ownership`): a key a
   checkout or another user put there is refused, with the reason (`problem`).
2. A public key travels as standard base64 of its 32 raw bytes (``public_key`` in
   ``agent.register``).
3. The *tag* of a key is the first 6 bytes of SHA-256 of its raw bytes; it binds
   message ids to their creator (`signing.new_message_id`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import threading
from pathlib import Path
from typing import Callable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .. import errors
from ..events.names import is_name

KEY_SUFFIX = ".key"
TAG_BYTES = 6

__all__ = [
    "KEY_SUFFIX",
    "LocalKeys",
    "PublicKey",
    "RefusedKey",
    "decode_public",
    "generate",
    "public_b64",
    "tag_of",
]


class RefusedKey(errors.IdentityError):
    """A key file is there but may not be used (a link, another user's, not 0600, tracked by git)."""


class PublicKey:
    """A verified-to-parse public key with its text form and tag (cheap to reuse)."""

    __slots__ = ("b64", "key", "raw", "tag")

    def __init__(self, raw: bytes):
        self.key = Ed25519PublicKey.from_public_bytes(raw)  # raises ValueError for a bad key
        self.raw = raw
        self.b64 = base64.b64encode(raw).decode()
        self.tag = tag_of(raw)

    def verify(self, signature: bytes, data: bytes) -> bool:
        try:
            self.key.verify(signature, data)
        except Exception:  # noqa: BLE001 - InvalidSignature, or a malformed signature
            return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PublicKey) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)


def generate() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def public_raw(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def public_b64(private: Ed25519PrivateKey) -> str:
    return base64.b64encode(public_raw(private)).decode()


def tag_of(raw_public: bytes) -> bytes:
    return hashlib.sha256(raw_public).digest()[:TAG_BYTES]


def decode_public(text: object) -> PublicKey:
    """A ``public_key`` field to a key.

    Raises:
        ValueError: not base64 of a valid 32-byte Ed25519 key.
    """
    if not isinstance(text, str) or len(text) != 44:
        raise ValueError("public_key must be base64 of 32 bytes")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("public_key is not base64") from None
    if len(raw) != 32:
        raise ValueError("public_key must be 32 bytes")
    return PublicKey(raw)


class LocalKeys:
    """The private keys of this repository's identities (``.thrum/identities``).

    ``vet(path, stat) -> reason | None`` says whether a key file may be used
    (default: `thrum.ownership.key_file_problem`).
    """

    def __init__(
        self, identities_dir: os.PathLike[str] | str, vet: Callable[[Path, os.stat_result], str | None] | None = None
    ):
        self.dir = Path(identities_dir)
        if vet is None:
            from ..ownership import key_file_problem

            vet = key_file_problem
        self._vet: Callable[[Path, os.stat_result], str | None] = vet
        self._cache: dict[str, tuple[Ed25519PrivateKey, PublicKey]] = {}
        self._missing: set[str] = set()  # looked for and absent: verification asks per line
        self._refused: dict[str, str] = {}  # name -> why its key file is not used

    def path(self, name: str) -> Path:
        if not is_name(name):
            raise ValueError(f"invalid agent name {name!r}")
        return self.dir / f"{name}{KEY_SUFFIX}"

    def problem(self, name: str) -> str | None:
        """Why ``name``'s key file was refused at its last reading (None: it was not)."""
        return self._refused.get(name)

    def get(self, name: str, *, fresh: bool = False) -> tuple[Ed25519PrivateKey, PublicKey] | None:
        """The key pair of a local identity, or None when this machine has no usable key for it.

        A name found absent (or refused) is remembered as such; ``fresh`` looks again
        (a key file someone copied in since, e.g. the same agent on a second machine).
        """
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        if name in self._missing and not fresh:
            return None
        try:
            data = self._read(name)
        except (FileNotFoundError, ValueError):
            if len(self._missing) < 100_000:
                self._missing.add(name)
            return None
        self._missing.discard(name)
        private = serialization.load_pem_private_key(data, password=None)
        if not isinstance(private, Ed25519PrivateKey):
            raise ValueError(f"{self.path(name)} is not an Ed25519 key")
        pair = (private, PublicKey(public_raw(private)))
        self._cache[name] = pair
        return pair

    def _read(self, name: str) -> bytes:
        """The key file's bytes, when it may be used.

        Raises:
            FileNotFoundError: there is none. ValueError: an invalid name, or a refused
                file (the reason is kept for `problem`).
        """
        path = self.path(name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                self._refused.pop(name, None)
                raise
            reason = f"{path} cannot be opened without following a link ({exc.strerror or exc})"
            self._refused[name] = reason
            raise ValueError(reason) from None
        try:
            refused = self._vet(path, os.fstat(fd))
            if refused is not None:
                self._refused[name] = refused
                raise ValueError(refused)
            self._refused.pop(name, None)
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
                if sum(map(len, chunks)) > 1 << 20:
                    raise ValueError(f"{path} is too large for a key")
            return b"".join(chunks)
        finally:
            os.close(fd)

    def require(self, name: str) -> tuple[Ed25519PrivateKey, PublicKey] | None:
        """`get` (fresh), but a key file that is there and refused is an error, not "no key".

        Raises:
            RefusedKey: the file may not be used; the message says why.
        """
        pair = self.get(name, fresh=True)
        if pair is None and name in self._refused:
            raise RefusedKey(f"agent {name!r} has a key file this machine will not use: {self._refused[name]}")
        return pair

    def create(self, name: str) -> tuple[Ed25519PrivateKey, PublicKey]:
        """Make and store a key pair for ``name``; an existing key is kept and returned.

        Raises:
            RefusedKey: a key file is there that may not be used (it is never replaced).
        """
        existing = self.require(name)
        if existing is not None:
            return existing
        private = generate()
        pem = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{os.urandom(4).hex()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # whatever the umask: a key is used only with mode 0600
            os.write(fd, pem)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
        self._cache.pop(name, None)
        pair = self.get(name, fresh=True)
        assert pair is not None
        return pair

    def forget(self, name: str) -> None:
        """Drop the cached key of ``name`` (after its files were removed)."""
        self._cache.pop(name, None)
        self._missing.discard(name)

    def names(self) -> list[str]:
        try:
            return sorted(
                p.name[: -len(KEY_SUFFIX)]
                for p in self.dir.glob(f"*{KEY_SUFFIX}")
                if is_name(p.name[: -len(KEY_SUFFIX)])
            )
        except OSError:
            return []


def rotate_file(
    local: LocalKeys, name: str, private: Ed25519PrivateKey | None = None
) -> tuple[Ed25519PrivateKey, PublicKey, Path]:
    """Make a new key pair for ``name`` and put it in place of the current key file, which is
    kept beside it (``{name}.key.retired-<time>``, never read again): the one deliberate
    replacement of a key (`thrum agent rotate-key`). Returns the new pair and the kept file.

    Raises:
        RefusedKey: the current key file may not be used. IdentityError: there is none.
    """
    current = local.require(name)
    if current is None:
        raise errors.IdentityError(f"agent {name!r} has no key on this machine to rotate")
    private = private or generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path = local.path(name)
    import time

    kept = path.with_name(f"{path.name}.retired-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.urandom(8).hex()}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.link(path, kept)
    os.replace(tmp, path)
    local.forget(name)
    pair = local.get(name, fresh=True)
    assert pair is not None
    return pair[0], pair[1], kept
