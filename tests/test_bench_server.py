"""bench/server.py measures the HTTP API beside the library in one run (figures, not timings)."""
from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_server_bench_reports_http_beside_the_library() -> None:
    figures = bench_json("server", "--quick")["figures"]
    assert [f["name"] for f in figures] == ["HTTP record+recall pairs/s", "HTTP record+recall p99"]
    assert_honest(figures)
