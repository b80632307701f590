"""bench/catchup.py runs on a small ledger: both workloads are caught up in new processes on fresh
copies, beside the baseline measured on the same copies, and every figure is read honestly."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_catchup_bench_on_a_small_ledger() -> None:
    out = bench_json("catchup", "--events", "2000", "--repeat", "1", timeout=300)
    assert_honest(out["figures"])
    assert out["events"] >= 2000
    assert out["run_events"] > 2  # a whole run: its start, its steps, its end
    assert all(out[k] > 0 for k in ("fact_ms", "fact_cpu_ms", "run_ms", "run_cpu_ms", "read_all_ms"))
