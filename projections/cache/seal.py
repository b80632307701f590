"""Authenticating projections.db: a keyed MAC (HMAC-SHA256) over what it serves and decides from.

projections.db is a cache anyone with write access can edit, and an unkeyed
digest only proves the bytes match a digest the editor can recompute. So each
checkpoint and snapshot row carries a MAC, under a per-memory-directory key
kept in a 0600 file beside it (`projections.key`), over its projection, seq,
fingerprint, state digest and the ledger's hash at that seq: a state is served
only if it is the one this memory computed, for this policy and code, from this
very ledger. A row that fails is never served; the file is discarded and
rebuilt from the ledger with a one-line warning (logger `memtape`).

The head projections.db remembers (see `ledger.anchor`) is sealed the same way,
so a forged file can neither serve memory nor claim a head the ledger never had.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path
from typing import Any

from memtape.ledger.errors import LedgerError

KEY_FILE = "projections.key"
KEY_BYTES = 32
TAG_BYTES = 16
log = logging.getLogger("memtape")
_keys: dict[str, bytes] = {}


def _load_key(path: Path) -> bytes:
    """The key in `path`, created (0600) on first use; written beside it and linked into place, so
    a process racing another never reads a half-written key."""
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(KEY_BYTES))
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process got there first: its key stands
            finally:
                tmp.unlink()
        except OSError as exc:
            raise LedgerError(f"{path}: cannot create the projections key ({exc.strerror})") from None
    try:
        key = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"{path}: cannot read the projections key ({exc.strerror})") from None
    if len(key) != KEY_BYTES:
        raise LedgerError(f"{path}: not a projections key ({len(key)} bytes); delete it and projections.db")
    return key


class Seal:
    """The MAC of one memory directory's projections.db."""

    def __init__(self, key: bytes):
        self._key = key

    @classmethod
    def beside(cls, projections_path: Path) -> "Seal":
        """The seal for a projections.db (its key file in the same directory)."""
        path = Path(projections_path).with_name(KEY_FILE)
        cached = _keys.get(str(path))
        if cached is None or not path.exists():
            cached = _keys[str(path)] = _load_key(path)
        return cls(cached)

    def mac(self, *parts: Any) -> str:
        body = "\x1f".join("" if p is None else str(p) for p in parts).encode()
        return hmac.new(self._key, body, hashlib.sha256).hexdigest()

    def holds(self, mac: str | None, *parts: Any) -> bool:
        return mac is not None and hmac.compare_digest(str(mac), self.mac(*parts))

    def tag(self, body: bytes) -> bytes:
        """A short MAC of bytes: keyed BLAKE2b of 128 bits, what each of the many interval
        versions and blocks carries (one C call, a third of HMAC-SHA256's time on a row's few
        bytes: a whole projection checks tens of thousands; a quarter of the hex `mac`'s room)."""
        return hashlib.blake2b(body, key=self._key, digest_size=TAG_BYTES).digest()


def warn(message: str) -> None:
    """One line for whoever runs memtape (the command line prints it as `warning: ...`)."""
    log.warning(" ".join(message.split()))
