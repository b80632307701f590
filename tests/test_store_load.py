"""A short run of bench/stores.py: 8 writer processes and a follower on PostgreSQL, on eventsourcing's
recorder and on SQLite, then every check (the bench exits non-zero when one fails)."""

from __future__ import annotations

import pytest

from devtools.pg import TempPostgres
from tests.bench_cli import bench_json


@pytest.mark.stress
def test_eight_writers_and_a_follower_lose_nothing(pg_server: TempPostgres) -> None:
    out = bench_json(
        "stores",
        "--seconds",
        "3",
        "--writers",
        "8",
        "--durability",
        "normal",
        "--pg-url",
        pg_server.create_database(),
        timeout=900,
    )
    loads = {r["kind"]: r for r in out["loads"]}
    assert {"postgresql", "sqlite"} <= set(loads)
    for r in out["loads"]:
        assert r["problems"] == [], r
    for kind in ("postgresql", "sqlite"):
        r = loads[kind]
        assert r["appended"] > 8 and r["head"] == r["appended"] == r["follower_seen"], r
        assert r["projections_equal"] in (True, None), r
