"""bench/cold_analytics.py runs on a small ledger: the command, the same SQL run directly and the bare
interpreter are each timed in new processes, the command's phases are all measured, and the aim is
read off the median honestly."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_cold_analytics_bench_on_a_small_ledger() -> None:
    out = bench_json("cold_analytics", "--events", "2000", "--repeat", "1", timeout=300)
    assert_honest(out["figures"])
    assert out["events"] >= 2000
    assert out["met"] == (out["cold_ms"] < out["aim_ms"] == 1000)
    assert set(out["phases_ms"]) == {"imports", "open and check current", "queries", "render"}
    assert all(ms > 0 for ms in out["phases_ms"].values())
