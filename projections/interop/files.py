"""Reading sources and writing exports safely.

Exports write only below `--out`, whatever a domain, run or trajectory id
contains: every path component is sanitized (`safe_name`), directories are
created one level at a time with mode 0700 and never followed when they are
symlinks, files are opened with O_NOFOLLOW and mode 0600, and the resolved
path is checked to lie under the resolved root before anything is written.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

import orjson

from memtape.ledger.errors import LedgerError

UNSAFE_RE = re.compile(r"[^A-Za-z0-9._-]")
MAX_NAME = 180


def canonical(obj: Any) -> bytes:
    """One byte string per JSON value: sorted keys, no whitespace (what the digest covers)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def digest_of(fmt: str, parts: list[tuple[str, Any]]) -> str:
    """sha256 over the format and each (relative path, canonical content), in path order."""
    h = hashlib.sha256(fmt.encode() + b"\x00")
    for rel, obj in sorted(parts, key=lambda p: p[0]):
        body = canonical(obj)
        h.update(rel.encode() + b"\x00" + str(len(body)).encode() + b"\x00" + body)
    return h.hexdigest()


def safe_name(raw: str, fallback: str = "_") -> str:
    """A single, harmless path component: [A-Za-z0-9._-] only, no leading dot, bounded length.

    Seed 000 sanitizes a host the same way (`localhost:5173` -> `localhost_5173`).
    """
    name = UNSAFE_RE.sub("_", raw)[:MAX_NAME]
    if not name:
        return fallback
    return "_" + name if name.startswith(".") else name


class ExportTree:
    """Writes files under one root and nowhere else."""

    def __init__(self, root: Path):
        self.root = root
        self.written: list[Path] = []
        self._root_real: Path | None = None

    def prepare_root(self, must_be_empty: bool) -> None:
        """Create the root (0700) if missing; refuse a symlink, a file, or (optionally) a non-empty dir."""
        root = self.root
        try:
            st = os.lstat(root)
        except FileNotFoundError:
            make_parents(root)
            try:
                os.mkdir(root, 0o700)
            except OSError as exc:
                raise LedgerError(f"{root}: cannot create ({exc.strerror})") from exc
            st = os.lstat(root)
        if stat.S_ISLNK(st.st_mode):
            raise LedgerError(f"{root}: is a symbolic link; refusing to export through it")
        if not stat.S_ISDIR(st.st_mode):
            raise LedgerError(f"{root}: not a directory")
        if must_be_empty and any(os.scandir(root)):
            raise LedgerError(f"{root}: directory is not empty; export into a new or empty directory")
        self._root_real = Path(os.path.realpath(root))

    def _dir(self, parts: list[str]) -> Path:
        assert self._root_real is not None
        current = self.root
        for part in parts:
            if part in ("", ".", "..") or "/" in part or "\x00" in part:
                raise LedgerError(f"refusing unsafe path component {part[:40]!r}")
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                os.mkdir(current, 0o700)
                os.chmod(current, 0o700)
                continue
            if not stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
                raise LedgerError(f"{current}: exists and is not a plain directory; refusing to write through it")
        real = Path(os.path.realpath(current))
        if real != self._root_real and self._root_real not in real.parents:
            raise LedgerError(f"{current}: resolves outside {self.root}; refusing")
        return current

    def mkdir(self, parts: list[str]) -> Path:
        """Create root/parts... (0700), refusing anything that would leave the root."""
        return self._dir(parts)

    def write(self, parts: list[str], data: bytes) -> Path:
        """Write `data` at root/parts... (the last part is the file name) with mode 0600."""
        *dirs, name = parts
        directory = self._dir(dirs)
        if name in ("", ".", "..") or "/" in name or "\x00" in name:
            raise LedgerError(f"refusing unsafe file name {name[:40]!r}")
        return write_file(directory / name, data, self.written)


def write_file(path: Path, data: bytes, written: list[Path] | None = None) -> Path:
    """Create or replace one regular file (0600) without following a symlink at `path`."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise LedgerError(f"{path}: cannot write ({exc.strerror})") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LedgerError(f"{path}: not a regular file")
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)
    if written is not None:
        written.append(path)
    return path


def make_parents(path: Path) -> None:
    """Create the directories above `path` that are missing (0700: they will hold memory)."""
    parent = path.parent
    if parent.is_dir():
        return
    old_umask = os.umask(0o077)
    try:
        parent.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        raise LedgerError(f"{parent}: not a directory") from None
    except OSError as exc:
        raise LedgerError(f"{parent}: cannot create ({exc.strerror})") from exc
    finally:
        os.umask(old_umask)


def write_single(out: Path, data: bytes) -> Path:
    """A one-file export (missing parent directories are created); a symlink or directory at `out`
    is refused."""
    make_parents(out)
    if out.is_symlink():
        raise LedgerError(f"{out}: is a symbolic link; refusing to write through it")
    if out.is_dir():
        raise LedgerError(f"{out}: is a directory; this format writes one file")
    return write_file(out, data)


def pretty(obj: Any) -> bytes:
    """JSON as the seeds write it (`JSON.stringify(x, null, 2)` / `json.dump(indent=2)`)."""
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n"
