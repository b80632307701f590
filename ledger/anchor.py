"""The remembered head: the highest seq (and its hash) this memory has seen, kept outside the ledger.

A hash chain proves that rows were not edited in place, but not that rows were
not cut off the end: a ledger with its last 50 rows deleted is a perfectly
valid, shorter chain. So every command that opens the ledger remembers the
head it saw — in a small 0600 file beside the ledger (`ledger.head` beside
`ledger.db`; a PostgreSQL store gets one named after its URL in the memory
directory) and, through a keeper the projections layer adds, in
projections.db — and the next opening checks the ledger still holds that seq
with that hash. An anchor kept elsewhere (`verify --head SEQ:HASH`) is checked
the same way.

Usage::

    keeper = HeadFile(head_path(store))
    refuse_if_behind(store, [keeper])      # LedgerTampered naming the missing seq
    ...
    remember_head(store, [keeper])
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from memtape.ledger.errors import DiskFull, LedgerError, LedgerTampered
from memtape.ledger.location import store_tag
from memtape.ledger.store import REWRITTEN, Store, VerifyResult

HEAD_SUFFIX = ".head"
_ANCHOR_RE = re.compile(r"^\s*(\d{1,19}):([0-9a-f]{64})\s*$")


@dataclass(frozen=True)
class Anchor:
    """A head seen once: `seq` held the event whose hash was `hash`; `source` says who remembers it."""

    seq: int
    hash: str
    source: str = "a given head"

    def text(self) -> str:
        return f"{self.seq}:{self.hash}"


def parse_anchor(text: str, source: str = "a given head") -> Anchor:
    """`SEQ:HASH` (what `verify` prints) -> Anchor; one-line error otherwise."""
    match = _ANCHOR_RE.match(text or "")
    if not match or not 0 < int(match.group(1)) < 2**63:
        raise LedgerError(f"{source} {str(text)[:90]!r}: expected SEQ:HASH (a seq >= 1 and 64 hex digits)")
    return Anchor(int(match.group(1)), match.group(2), source)


class Keeper(Protocol):
    """Somewhere a head is remembered (the head file, projections.db)."""

    def load(self) -> Anchor | None: ...
    def save(self, anchor: Anchor) -> None: ...


def head_path(store: Store) -> Path:
    """The head file: beside a SQLite ledger (`ledger.db` -> `ledger.head`); for a server store,
    in its home (the memory directory), named after the store's URL (its password left out)."""
    if store.path is not None:
        return store.path.with_suffix(HEAD_SUFFIX)
    if store.home is None:
        raise LedgerError(f"{store.where}: a server store's head file needs the memory directory")
    return store.home / f"{store_tag(store)}{HEAD_SUFFIX}"


class HeadFile:
    """The 0600 head file: `{"seq": N, "hash": "..."}`, only ever moved forward (under a lock, so
    two processes closing at once never lower it)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load(self) -> Anchor | None:
        try:
            raw = self.path.read_text()  # whole: `save` renames a complete file into place
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot read the remembered head ({exc.strerror})") from None
        try:
            data = json.loads(raw)
            return parse_anchor(f"{int(data['seq'])}:{data['hash']}", self.path.name)
        except (ValueError, KeyError, TypeError, LedgerError):
            raise LedgerTampered(
                f"{self.path}: not a head record; the remembered head was damaged "
                f"(check the ledger with `memtape verify`, then delete it)"
            ) from None

    def save(self, anchor: Anchor) -> None:
        """Write the head to a temporary file, fsync it, and rename it over the old one, so that a
        crash or a full disk leaves the old head or the new one, never an empty file. A lock on the
        directory orders two processes saving at once (the head is only moved forward)."""
        try:
            lock = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return  # nothing can be remembered here (verify still checks the chain)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                old = json.loads(self.path.read_text() or "null")
                if isinstance(old, dict) and int(old.get("seq", 0)) > anchor.seq:
                    return
            except (OSError, ValueError, TypeError):
                pass  # missing or damaged: `load` reported damage; this head replaces it only after a clean check
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write(json.dumps({"seq": anchor.seq, "hash": anchor.hash}) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(temporary, self.path)
            except OSError:
                temporary.unlink(missing_ok=True)  # a full or read-only disk: the old head stays
        finally:
            os.close(lock)  # and with it the lock


def anchor_fault(store: Store, anchor: Anchor) -> tuple[int, str] | None:
    """(seq, reason) when the ledger does not hold `anchor`: shorter (the first missing seq is
    named) or another hash at its seq; None when it does."""
    if anchor.seq <= 0:
        return None
    tip_seq, _ = store.tip()
    if tip_seq < anchor.seq:
        return tip_seq + 1, (
            f"seq {tip_seq + 1} is missing: the ledger ends at seq {tip_seq}, but {anchor.source} saw seq {anchor.seq}"
        )
    actual = store.hash_at(anchor.seq)
    if actual != anchor.hash:
        return anchor.seq, (
            f"seq {anchor.seq} holds hash {str(actual)[:16]}…, but {anchor.source} saw {anchor.hash[:16]}… there"
        )
    return None


def loaded(keepers: Iterable[Keeper]) -> list[Anchor]:
    return [a for a in (k.load() for k in keepers) if a is not None]


def require_anchor(store: Store, anchor: Anchor) -> None:
    """Raise LedgerTampered (one line naming the seq) when the ledger does not hold `anchor`."""
    fault = anchor_fault(store, anchor)
    if fault is not None:
        raise LedgerTampered(
            f"ledger cut or rewritten: {fault[1]}; nothing was read (`memtape verify` names what changed)"
        )


def refuse_if_behind(store: Store, keepers: Sequence[Keeper]) -> None:
    """Raise LedgerTampered when the ledger does not hold a head a keeper remembers."""
    for anchor in loaded(keepers):
        require_anchor(store, anchor)


def remember_head(store: Store, keepers: Sequence[Keeper]) -> Anchor | None:
    """Remember the ledger's current head in every keeper (never lowering one). Nothing is
    remembered while the ledger no longer holds a head already remembered: that is reported by
    the next opening, never laundered into a new head."""
    seq, h = store.tip()
    if not seq or h is None:
        return None
    try:
        if any(anchor_fault(store, a) is not None for a in loaded(keepers)):
            return None
    except (LedgerTampered, DiskFull):
        return None
    anchor = Anchor(seq, h, "this memory")
    for keeper in keepers:
        try:
            keeper.save(anchor)
        except DiskFull:
            pass  # remembered by the next command that has room; an older head is never lost
    return anchor


def verify_ledger(store: Store, keepers: Sequence[Keeper], anchors: Sequence[Anchor] = ()) -> VerifyResult:
    """`memtape verify`: the chain walk, then every remembered head and every given anchor; the
    first fault names its seq (the chain's own faults first: they are the more precise)."""
    result = store.verify()
    remembered = [*loaded(keepers), *anchors]
    if not result.ok:
        tail = result.rewritten_tail
        if tail is not None and any(a.seq == tail and anchor_fault(store, a) is not None for a in remembered):
            return VerifyResult(False, tail - 1, tail, REWRITTEN)
        return result
    for anchor in remembered:
        fault = anchor_fault(store, anchor)
        if fault is not None:
            return VerifyResult(
                False, min(result.count, fault[0] - 1), fault[0], fault[1], result.head_seq, result.head_hash
            )
    return result
