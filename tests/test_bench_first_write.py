"""bench/first_write.py runs on a small ledger: the first write after `memtape.open()` is timed in new
processes on fresh copies of the big memory and of a 1,000-event one, every figure read honestly."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_first_write_bench_on_a_small_ledger() -> None:
    out = bench_json("first_write", "--events", "3000", "--repeat", "1", timeout=300)
    assert_honest(out["figures"])
    assert out["events"] >= 3000 and out["small_events"] >= 1000
    assert all(
        out[k] > 0
        for k in (
            "first_write_ms",
            "small_first_write_ms",
            "lock_held_ms",
            "small_lock_held_ms",
            "open_ms",
            "small_open_ms",
        )
    )
    assert out["lock_held_ms"] < out["first_write_ms"] and out["small_lock_held_ms"] < out["small_first_write_ms"]
