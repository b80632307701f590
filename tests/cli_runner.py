"""Run `memtape` in-process (fast) and capture exit code, stdout and stderr."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass

from memtape.cli import main


@dataclass
class CliResult:
    code: int
    out: str
    err: str


def run_cli(*args: str, stdin: bytes | None = None) -> CliResult:
    """`memtape ARGS...` in this process; SystemExit becomes the exit code (0 when main returns)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    code = 0
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin = old_stdin
    return CliResult(code, out.getvalue(), err.getvalue())
