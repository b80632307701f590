"""bench/serve_start.py runs on a small ledger: a warmed server and one that does not warm each
start over a fresh copy with a run appended, and answer their first `/ui/`; every figure honest."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_serve_start_bench_on_a_small_ledger() -> None:
    out = bench_json("serve_start", "--events", "2000", "--repeat", "1", timeout=300)
    assert_honest(out["figures"])
    assert out["events"] >= 2000 and out["run_events"] > 2
    assert all(out[k] > 0 for k in ("warm_ready_ms", "warm_page_ms", "cold_ready_ms", "cold_page_ms"))
