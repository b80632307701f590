"""bench/verified_reads.py runs on a tiny ledger, and both rebuilds give the same projections (the
bench exits non-zero when they do not)."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_verified_reads_bench_on_a_tiny_ledger() -> None:
    (fig,) = bench_json("verified_reads", "--events", "400", "--repeat", "1")["figures"]
    assert_honest([fig])
    assert "verification costs" in fig["note"] and "400 events" in fig["name"]
