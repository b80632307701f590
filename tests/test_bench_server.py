"""bench/server.py measures the HTTP API beside the library in one run (figures, not timings)."""
from __future__ import annotations

from bench import server


def test_server_bench_reports_http_beside_the_library() -> None:
    figures = server.run(quick=True)
    assert [f.name for f in figures] == ["HTTP record+recall pairs/s", "HTTP record+recall p99"]
    for figure in figures:
        assert figure.value > 0 and figure.baseline_value is not None and figure.baseline_value > 0
        assert figure.ratio is not None
