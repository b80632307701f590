"""A short version of bench/stores.py: 8 writer processes and a follower on each store, then every check."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.stores import load
from devtools.pg import TempPostgres


@pytest.mark.stress
@pytest.mark.parametrize("kind", ["postgresql", "sqlite"])
def test_eight_writers_and_a_follower_lose_nothing(kind: str, pg_server: TempPostgres, tmp_path: Path) -> None:
    url = pg_server.create_database() if kind == "postgresql" else f"sqlite:///{tmp_path / 'm' / 'ledger.db'}"
    result = load(url, seconds=3, writers=8, durability="normal")
    assert result.problems == []
    assert result.appended > 8 and result.head == result.appended == result.follower_seen
    assert result.projections_equal in (True, None)
