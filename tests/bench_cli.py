"""The bench scripts run as a person runs them (`python bench/NAME.py ... --json`): tests and bench
are independent (neither imports the other; import-linter checks it), so a test that keeps a bench
runnable and honest reads its printed JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_bench(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python bench/NAME.py ARGS...` from the repository root, with this interpreter."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / f"{name}.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def bench_json(name: str, *args: str, timeout: float = 600) -> dict[str, Any]:
    """The JSON object a bench prints with `--json` (its figures, and what else it measured)."""
    done = run_bench(name, *args, "--json", timeout=timeout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def assert_honest(figures: list[dict[str, Any]]) -> None:
    """Every figure measured, positive and beside a positive baseline, its ratio read as "times
    better" (value / baseline, or baseline / value when lower is better) and met when it reaches its aim."""
    assert figures
    for f in figures:
        assert f["value"] > 0 and f["baseline_value"] and f["baseline_value"] > 0, f
        ratio = f["value"] / f["baseline_value"] if f["higher_is_better"] else f["baseline_value"] / f["value"]
        assert f["ratio"] == pytest.approx(ratio) and f["ratio"] > 0, f
        assert f["met"] == (None if f["aim"] is None else f["ratio"] >= f["aim"]), f
