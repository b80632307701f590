"""bench/server.py measures the HTTP API beside the library, 8 and 32 concurrent clients beside
one, and a kill -9 mid-load (figures, not timings): no acknowledged write is missing after it."""

from __future__ import annotations

from tests.bench_cli import assert_honest, bench_json


def test_server_bench_reports_load_and_loses_no_acknowledged_write_to_a_kill() -> None:
    measured = bench_json("server", "--quick")
    figures = measured["figures"]
    assert [f["name"] for f in figures] == [
        "HTTP record+recall pairs/s",
        "HTTP record+recall p99",
        "HTTP 8 clients: requests/s",
        "HTTP 8 clients: p99 of a request",
        "HTTP 32 clients: requests/s",
        "HTTP 32 clients: p99 of a request",
        "kill -9 mid-load: acknowledged steps in the ledger",
    ]
    assert_honest(figures)
    killed = measured["killed"]
    assert killed["acknowledged"] >= 200 and killed["missing"] == 0 and killed["verified"]
    assert figures[-1]["met"] is True
