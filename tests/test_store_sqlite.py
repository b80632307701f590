"""The store contract (tests/store_contract.py) on the SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store_contract import StoreContract


class TestSqliteStore(StoreContract):
    kind = "sqlite"

    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'memory' / 'ledger.db'}"
