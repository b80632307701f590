"""bench/redaction.py runs at a small size: the door's scrubbing per event is measured in this tree
and in an earlier revision's tree (each in its own process, checked to import its own code), and
every figure is read honestly."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_redaction_bench_beside_the_earlier_door() -> None:
    out = bench_json("redaction", "--events", "300", "--rounds", "1", "--hostile", "300", timeout=600)
    figures = out["figures"]
    assert_honest(figures)
    assert len(figures) == 4
    assert [f["name"].split(" (")[0] for f in figures][2:] == [
        "scrub one of 300 adversarial strings",
        "the slowest of 300 adversarial strings",
    ]
    assert all(f["unit"] == "µs" and not f["higher_is_better"] and "89fbf54" in f["baseline"] for f in figures)
