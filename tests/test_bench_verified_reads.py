"""bench/verified_reads.py runs on a tiny ledger, and both rebuilds give the same projections."""
from __future__ import annotations

from bench.verified_reads import run


def test_verified_reads_bench_on_a_tiny_ledger() -> None:
    (fig,) = run(events=400, repeat=1)
    assert fig.value > 0 and fig.baseline_value and fig.baseline_value > 0
    assert "verification costs" in fig.note
