"""Every analytics command answers in every `--format` (table, json, csv, parquet)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from memtape.analytics.answers import ANALYSES, analyse, sections
from memtape.ledger.clock import SteppingClock
from memtape.ledger.store import SqliteStore
from memtape.output import emit
from tests.analytics_builders import learning_ledger
from tests.cli_runner import run_cli


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fmt") / "memory"
    d.mkdir(mode=0o700)
    clock = SteppingClock()
    store = SqliteStore.open(d / "ledger.db", clock=clock)
    learning_ledger(store, clock, runs=4)
    store.close()
    return d


@pytest.fixture(scope="module")
def answers(memory: Path) -> dict[str, dict[str, list[dict]]]:
    """Every analysis through `--format json`, once."""
    out = {}
    for name in ANALYSES:
        res = run_cli("--memory-dir", str(memory), "analytics", name, "--format", "json")
        assert res.code == 0, res.err
        out[name] = orjson.loads(res.out)
    return out


def test_json_has_every_section(memory: Path, answers: dict[str, dict[str, list[dict]]]) -> None:
    store = SqliteStore.open(memory / "ledger.db")
    for name, data in answers.items():
        assert list(data) == list(sections(ANALYSES[name][0]))
    assert answers["runs"] == orjson.loads(orjson.dumps(analyse("runs", store).as_json()))
    store.close()
    assert len(answers["runs"]["runs"]) == 4 and answers["promotions"]["funnel"][0]["lessons"] == 1


@pytest.mark.parametrize("name", list(ANALYSES))
def test_csv_is_the_main_section(memory: Path, answers: dict[str, dict[str, list[dict]]], name: str) -> None:
    res = run_cli("--memory-dir", str(memory), "analytics", name, "--format", "csv")
    assert res.code == 0, res.err
    rows = list(csv.DictReader(io.StringIO(res.out)))
    main = next(iter(answers[name].values()))
    assert len(rows) == len(main)
    for got, want in zip(rows, main):
        assert list(got) == list(want)
        for k, v in want.items():
            if isinstance(v, bool):
                assert got[k] == ("true" if v else "false")
            elif isinstance(v, (int, float)):
                assert float(got[k]) == pytest.approx(v)
            elif isinstance(v, list):
                assert orjson.loads(got[k]) == v
            else:
                assert got[k] == ("" if v is None else v)


@pytest.mark.parametrize("name", list(ANALYSES))
def test_parquet_to_a_file(memory: Path, answers: dict[str, dict[str, list[dict]]], name: str, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.parquet"
    res = run_cli("--memory-dir", str(memory), "analytics", name, "--format", "parquet", "--out", str(out))
    assert res.code == 0, res.err
    assert pq.read_table(out).to_pylist() == next(iter(answers[name].values()))


def test_table_format_prints_every_section(memory: Path) -> None:
    res = run_cli("--memory-dir", str(memory), "analytics", "promotions")
    assert res.code == 0, res.err
    for title in ("funnel", "time to promotion", "by category", "by domain"):
        assert title in res.out


def test_section_selects_one_table(memory: Path, tmp_path: Path) -> None:
    res = run_cli("--memory-dir", str(memory), "analytics", "runs", "--format", "json", "--section", "lineage")
    assert res.code == 0 and orjson.loads(res.out) == []
    out = tmp_path / "s.csv"
    res = run_cli(
        "--memory-dir",
        str(memory),
        "analytics",
        "recall",
        "--format",
        "csv",
        "--section",
        "never_recalled",
        "--out",
        str(out),
    )
    assert res.code == 0 and out.read_text().startswith("lesson_id,lesson,category")


def test_bad_section_is_one_line_error(memory: Path) -> None:
    res = run_cli("--memory-dir", str(memory), "analytics", "runs", "--section", "nope")
    assert res.code == 1 and res.err.startswith("error: no section 'nope'") and res.err.count("\n") == 1


def test_parquet_to_stdout_writes_bytes(memory: Path) -> None:
    class Sink(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.buffer = io.BytesIO()

        def isatty(self) -> bool:
            return False

    store = SqliteStore.open(memory / "ledger.db")
    report = analyse("runs", store)
    store.close()
    import sys

    old, sys.stdout = sys.stdout, Sink()
    try:
        emit(report, "parquet")
        data = sys.stdout.buffer.getvalue()  # type: ignore[attr-defined]
    finally:
        sys.stdout = old
    assert data[:4] == b"PAR1"
    assert len(pq.read_table(io.BytesIO(data)).to_pylist()) == len(report.sections["runs"].rows)


def test_no_ledger_is_a_one_line_error(tmp_path: Path) -> None:
    d = tmp_path / "empty"
    res = run_cli("--memory-dir", str(d), "analytics", "runs", "--format", "json")
    # a place with no ledger is a typo more often than empty memory: said, and nothing created
    assert res.code == 1 and res.err == f"error: no memory at {d}\n" and not d.exists()
    d.mkdir(mode=0o700)
    SqliteStore.open(d / "ledger.db").close()
    res = run_cli("--memory-dir", str(d), "analytics", "runs", "--format", "json")
    assert res.code == 0 and orjson.loads(res.out)["runs"] == []  # an empty ledger: every answer is empty
