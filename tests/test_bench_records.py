"""bench/records.py runs at a small size: the generated record code (RecordedEvent's constructor,
`evolve`, `build`) is timed beside the dataclasses way in the same run, and every figure is honest."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_records_bench_beside_the_dataclasses_way() -> None:
    out = bench_json("records", "--quick", timeout=300)
    figures = out["figures"]
    assert_honest(figures)
    assert [f["baseline"] for f in figures] == ["RecordedEvent(...)", "dataclasses.replace", "LessonEntry(**row)"]
    assert all(f["unit"] == "µs" and not f["higher_is_better"] for f in figures)
