"""bench/append.py stays runnable: every figure is measured, positive, and beside its baseline."""
from __future__ import annotations

from bench import Figure, markdown
from bench.append import run


def test_append_bench_runs_at_tiny_sizes() -> None:
    figures = run(events=300, lesson_sizes=(100,))
    names = [f.name for f in figures]
    assert any(n.startswith("append, batches of 1,000") for n in names)
    assert any("vs eventsourcing" in n for n in names)
    assert any(n.startswith("read back") for n in names) and any(n.startswith("verify") for n in names)
    assert "one update at 100 lessons" in names
    for f in figures:
        assert f.value > 0 and f.baseline_value and f.baseline_value > 0 and f.ratio and f.ratio > 0, f
    table = markdown(figures)
    assert table.count("\n") == len(figures) + 2 and "raw sqlite3 executemany" in table


def test_ratio_reads_as_times_better() -> None:
    faster = Figure("b", "x", 2.0, "ms", "base", 10.0, aim=4, higher_is_better=False)
    assert faster.ratio == 5.0 and faster.met is True
    slower = Figure("b", "y", 100.0, "events/s", "base", 400.0, aim=0.5)
    assert slower.ratio == 0.25 and slower.met is False
