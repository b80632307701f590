"""bench/append.py stays runnable: every figure is measured, positive, and beside its baseline, its
ratio read as "times better" whichever way the figure goes."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_append_bench_runs_at_tiny_sizes() -> None:
    figures = bench_json("append", "--events", "300", "--lesson-sizes", "100")["figures"]
    names = [f["name"] for f in figures]
    assert any(n.startswith("append, batches of 1,000") for n in names)
    assert any("vs eventsourcing" in n for n in names)
    assert any(n.startswith("read back") for n in names) and any(n.startswith("verify") for n in names)
    assert "one update at 100 lessons" in names
    assert_honest(figures)
    # both readings of a ratio occur: throughputs (higher is better) and the update's latency (lower is)
    assert {f["higher_is_better"] for f in figures} == {True, False}
    assert any(f["met"] is not None for f in figures)
