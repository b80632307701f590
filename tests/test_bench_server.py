"""bench/server.py measures the HTTP API beside the library, 8 and 32 concurrent clients beside
one, and a kill -9 mid-load (figures, not timings): no acknowledged write is missing after it."""

from __future__ import annotations

import pytest

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
        "floor 32 clients: requests/s",
        "floor 32 clients: p99 of a request",
        "kill -9 mid-load: acknowledged steps in the ledger",
    ]
    assert_honest(figures)
    killed = measured["killed"]
    assert killed["acknowledged"] >= 200 and killed["missing"] == 0 and killed["verified"]
    assert figures[-1]["met"] is True
    floor, bound = measured["floor"], measured["littles_law"]
    assert measured["parser"] == "httptools"
    assert floor["requests_per_s"]["32"] > 0 and floor["p99_ms"]["1"] > 0
    by_name = {f["name"]: f for f in figures}
    rate_32, p99_32 = by_name["HTTP 32 clients: requests/s"], by_name["HTTP 32 clients: p99 of a request"]
    assert bound["mean_wait_ms"] == pytest.approx(32 / rate_32["value"] * 1000)
    assert bound["least_p99_ratio"] == pytest.approx(bound["mean_wait_ms"] / p99_32["baseline_value"])
    assert floor["p99_ms"]["32"] == by_name["floor 32 clients: p99 of a request"]["value"]
