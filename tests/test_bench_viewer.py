"""bench/viewer.py measures every page of the web viewer beside the same reads through the Python
API (figures, not timings: the aims are checked by the bench's own run, in docs/benchmarks.md)."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json

PAGES = ("runs", "run", "step", "item", "diff", "search")


def test_viewer_bench_measures_every_page_beside_the_api() -> None:
    measured = bench_json("viewer", "--quick")
    names = [f["name"] for f in measured["figures"]]
    assert names == [f"GET {p} page, {when}" for p in PAGES for when in ("first at this head", "again")]
    assert_honest(measured["figures"])
    assert set(measured["pages"]) == set(PAGES) and measured["events"] >= 5_000
    assert all(page["path"].startswith("/ui/") for page in measured["pages"].values())
