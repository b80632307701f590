"""One seal per cache file: projections.db and the analytics mirror are each authenticated whole.

Both caches are disposable files anyone with write access can edit, so what they serve is
trusted only as far as this memory's key (`projections.key`, 0600, beside them) vouches for it:

- a **digest per table**: the number of rows and the sum of their keyed hashes (mod 2**64),
  kept up to date as rows come and go (a row's hash goes in when it is written, out when it is
  deleted), so no write hashes the table again. A sum of keyed hashes is a multiset hash: without
  the key no edit, insertion or deletion of rows keeps it (the rows of a table are unordered, as
  a database keeps them);
- a **checkpoint**, sealed (HMAC-SHA256): the ledger head the file reached (its seq and hash),
  the code that wrote it, and the tables' digests. It is written in the same transaction as the
  rows it counts, and read in the same transaction as whatever is served from them, so a write
  landing between two reads is never taken for an edit;
- a **stamp**, sealed, beside the file (`<file>.seal`): its inode, size and times as memtape
  last left them. A file whose stamp holds was touched by nobody else and is served without
  reading it whole; any other write changes its ctime (which no user-space call sets back), and
  the file is then checked whole — every table hashed again against the sealed checkpoint —
  before anything in it is used. The stamp file is also the lock that orders memtape's writers,
  so a stamp is always written by the writer whose commit it describes.

What fails is never served: the file is discarded and rebuilt from the ledger with a one-line
warning (logger `memtape`).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import hmac
import logging
import os
import secrets
import stat
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from memtape.ledger.errors import LedgerError
from memtape.ledger.location import stamp_path

KEY_FILE = "projections.key"
KEY_BYTES = 32
#: a table's digest is a sum of 64-bit row hashes, kept modulo this
MODULUS = 1 << 64
#: the stamp file's length: one record, written in place (see `Stamp.seal`)
STAMP_BYTES = 256
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


class Key:
    """One memory directory's key: MACs of what a cache seals, keyed hashes of its rows."""

    def __init__(self, key: bytes):
        self._key = key
        self._dumps = orjson.dumps
        self._blake = hashlib.blake2b

    @classmethod
    def beside(cls, cache_path: Path) -> Key:
        """The key of the memory directory a cache file is in (its key file in the same directory)."""
        path = Path(cache_path).with_name(KEY_FILE)
        cached = _keys.get(str(path))
        if cached is None or not path.exists():
            cached = _keys[str(path)] = _load_key(path)
        return cls(cached)

    def mac(self, *parts: Any) -> str:
        body = "\x1f".join("" if p is None else str(p) for p in parts).encode()
        return hmac.new(self._key, body, hashlib.sha256).hexdigest()

    def holds(self, mac: str | None, *parts: Any) -> bool:
        return isinstance(mac, str) and hmac.compare_digest(mac, self.mac(*parts))

    def tag(self, body: bytes, size: int = 8) -> bytes:
        """A short keyed hash of bytes (keyed BLAKE2b): what an item's name is filed under where it
        must not be kept in clear (the index of mentions)."""
        return self._blake(body, key=self._key, digest_size=size).digest()

    def row(self, row: Sequence[Any]) -> int:
        """A row's keyed 64-bit hash (of `_body`)."""
        return int.from_bytes(self._blake(self._body(row), key=self._key, digest_size=8).digest(), "little")

    def hashes(self, rows: Iterable[Sequence[Any]]) -> tuple[int, int]:
        """How many rows, and the sum of their `row` hashes: one keyed hasher, copied for each row
        (keying a hasher afresh costs as much as hashing a short row)."""
        keyed = self._blake(key=self._key, digest_size=8)
        body, from_bytes = self._body, int.from_bytes
        n = total = 0
        for r in rows:
            h = keyed.copy()
            h.update(body(r))
            total += from_bytes(h.digest(), "little")
            n += 1
        return n, total

    def _body(self, row: Sequence[Any]) -> bytes:
        """What a row's hash covers: its columns (text, integers, NULL) as one JSON array, and a
        last column of bytes after it: JSON arrays of scalars are prefix-free, so no two rows of
        one table share an encoding. Text JSON cannot hold (a lone surrogate) is encoded by `repr`,
        which begins with '(' where JSON begins with '['."""
        last = row[-1] if row else None
        try:
            return self._dumps(row[:-1]) + last if isinstance(last, bytes) else self._dumps(row)
        except TypeError:
            return repr(tuple(row)).encode("utf-8", "surrogatepass")


class Digest:
    """Per table, its rows and the sum of their keyed hashes (mod 2**64): additive, so a row's
    hash is added when it is written and taken out when it is deleted, and a table is hashed whole
    only to check it. `str()` is what a checkpoint seals."""

    def __init__(self, tables: Sequence[str], text: str | None = None):
        self.tables = tuple(tables)
        self.parts: dict[str, list[int]] = {t: [0, 0] for t in self.tables}
        if text:
            try:
                pairs = [p.split(":") for p in text.split("/")]
                for table, (n, total) in zip(self.tables, pairs, strict=True):
                    self.parts[table] = [int(n), int(total)]
            except ValueError:  # not ours: it cannot hold for any file
                self.parts = {t: [-1, -1] for t in self.tables}

    def add(self, table: str, n: int, total: int, sign: int = 1) -> None:
        """Add (`sign` 1) or take out (-1) `n` rows whose hashes sum to `total`."""
        part = self.parts[table]
        part[0] += sign * n
        part[1] = (part[1] + sign * total) % MODULUS

    def rows(self, key: Key, table: str, rows: Iterable[Sequence[Any]], sign: int = 1) -> None:
        """Add (or take out) rows as stored, hashed by `key`."""
        self.add(table, *key.hashes(rows), sign)

    def __str__(self) -> str:
        return "/".join(f"{n}:{total}" for n, total in self.parts.values())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Digest) and str(self) == str(other)

    def differs(self, other: Digest) -> str | None:
        """The first table whose rows are not the ones `other` counts; None when all are."""
        return next((t for t in self.tables if self.parts[t] != other.parts.get(t)), None)


@dataclass(frozen=True)
class Checkpoint:
    """What a cache file holds, as its writer sealed it: the ledger head it is bound to (seq and
    the hash there), the code that wrote it (`version`) and its tables' digest."""

    seq: int
    ledger_hash: str
    version: str
    digest: str

    def parts(self, what: str) -> tuple[Any, ...]:
        return (what, self.seq, self.ledger_hash, self.version, self.digest)

    def mac(self, key: Key, what: str) -> str:
        """The seal of this checkpoint of cache `what`."""
        return key.mac(*self.parts(what))

    def holds(self, key: Key, what: str, mac: str | None) -> bool:
        return key.holds(mac, *self.parts(what))


def regular(path: Path) -> bool:
    """A regular file, not a symlink: what a cache opens, reads or lets its database open (a FIFO in
    its place would block a read forever; a link could point it at another file, the ledger's too)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


class Stamp:
    """The sealed stamp of one cache file, and the lock its writers hold (`locked`).

    The stamp is the file's inode, size, mtime and ctime, and for each of its write-ahead logs
    (`logs`, suffixes) that holds anything, its inode, size and mtime: a log's ctime moves
    whenever a reader opens it, but its bytes change only with its mtime, and a log that is
    empty or absent holds nothing to check."""

    def __init__(self, target: Path, key: Key, logs: Sequence[str] = ()):
        self.target = Path(target)
        self.path = stamp_path(self.target)
        self.key = key
        self.logs = tuple(Path(f"{self.target}{suffix}") for suffix in logs)
        self._what = ("cache file stamp", self.target.name)

    def current(self) -> str:
        """The file as it is now (`-` for a file that is not there)."""
        parts = []
        try:
            st = os.stat(self.target)
            parts.append(f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}")
        except FileNotFoundError:
            parts.append("-")
        for log_path in self.logs:
            try:
                st = os.stat(log_path)
                parts.append(f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}" if st.st_size else "-")
            except FileNotFoundError:
                parts.append("-")
        return "/".join(parts)

    def sealed(self) -> str | None:
        """The stamp last sealed, when its seal holds."""
        if not regular(self.path):
            return None
        try:
            raw = self.path.read_bytes()[:STAMP_BYTES].decode("ascii").split()
        except (OSError, UnicodeDecodeError):
            return None
        if len(raw) != 2 or not self.key.holds(raw[1], *self._what, raw[0]):
            return None
        return raw[0]

    def holds(self) -> bool:
        """The file is as memtape last left it."""
        return self.sealed() == self.current()

    @contextmanager
    def locked(self, shared: bool = False, wait: bool = True) -> Iterator[bool]:
        """This cache's writer lock (a `flock` on the stamp file): exclusive for whoever writes the
        file, shared for whoever checks it whole and seals the stamp again. Yields False (no lock)
        when `wait` is False and another process holds it."""
        fd = self._open()
        try:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # and with it the lock

    def seal(self, stamp: str | None = None) -> None:
        """Remember, sealed, the file as it is now (or as `stamp` says it was), in place: one record
        of fixed length at the start of the stamp file (a reader that catches it half-written finds
        a seal that does not hold, and checks the file whole). Call with the lock held."""
        stamp = self.current() if stamp is None else stamp
        record = f"{stamp} {self.key.mac(*self._what, stamp)}\n".encode().ljust(STAMP_BYTES)
        fd = self._open()
        try:
            os.pwrite(fd, record, 0)
        finally:
            os.close(fd)

    def _open(self) -> int:
        """The stamp file, opened to read and write (created 0600): whatever else is in its place (a
        FIFO, a link, a device) is replaced, never opened; a directory is named in one line."""
        if os.path.lexists(self.path) and not regular(self.path):
            try:
                os.unlink(self.path)
            except OSError as exc:
                raise LedgerError(
                    f"{self.path}: cannot keep the cache's seal there ({exc.strerror}); "
                    "move it out of the memory directory"
                ) from None
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            why = os.strerror(exc.errno or errno.EIO)
            raise LedgerError(
                f"{self.path}: cannot keep the cache's seal there ({why}); move it out of the memory directory"
            ) from None


def warn(message: str) -> None:
    """One line for whoever runs memtape (the command line prints it as `warning: ...`)."""
    log.warning(" ".join(message.split()))
