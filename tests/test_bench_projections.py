"""bench/projections.py runs on a small ledger and prints, with --json, the one object its
usage names (events, rebuild and raw-scan throughput, as-of p99, audit, sizes), every figure honest."""

from __future__ import annotations

from memtape.projections.folds.state import PROJECTIONS
from tests.bench_cli import assert_honest, bench_json


def test_projections_bench_on_a_small_ledger() -> None:
    out = bench_json("projections", "--events", "3000", "--lessons", "300", "--trajectories", "50", timeout=300)
    assert_honest(out["figures"])
    assert out["events"] >= 3000
    for key in (
        "rebuild_events_per_s",
        "raw_scan_events_per_s",
        "folds_alone_events_per_s",
        "verified_read_floor_events_per_s",
        "asof_p99_ms",
        "audit_ms",
        "projections_db_bytes",
        "ledger_bytes",
    ):
        assert out[key] > 0, key
    # the folds alone do less than a rebuild (no read, no verification, no versions written)
    assert out["folds_alone_events_per_s"] > out["rebuild_events_per_s"]
    # each projection folded alone, where the folds' time goes
    assert set(out["fold_alone_us_per_event"]) == set(PROJECTIONS) and all(
        v > 0 for v in out["fold_alone_us_per_event"].values()
    )
    assert set(out["asof_whole_projection_p99_ms"]) == set(out["asof_whole_projection_items"])
