"""bench/duck_queries.py stays honest and runnable: DuckDB (native and through the scanner) and SQLite
give the same answers, including on the cases the synthetic log never produces, and every figure is
measured and positive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devtools.synthetic import build_ledger
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import (
    DomainRecall,
    ErrorRecall,
    LessonDeduplicated,
    LessonPromoted,
    RunCompleted,
    RunStarted,
    SubjectForgotten,
)
from tests.bench_cli import assert_honest, bench_json, run_bench

QUERIES = {"promotions funnel", "recall hit rate", "run outcomes by domain", "events by type and day"}


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bench on 3,000 synthetic events, plus a promotion, recalls that returned lessons, a run still
    running and a run completed twice (the synthetic log has none of these)."""
    path = tmp_path_factory.mktemp("duck") / "ledger.db"
    store = build_ledger(path, 3_000)
    lid = next(store.read(types=["lesson_recorded"])).data["lesson_id"]
    env = {"run_id": "extra1", "domain": "www.extra.test"}
    store.append(
        [
            NewEvent(RunStarted(goal="g"), **env),
            NewEvent(DomainRecall(matched=3, lesson_ids=[lid, "lsn_other"]), **env),
            NewEvent(ErrorRecall(command="click", error_snippet="x", matched=1, lesson_ids=[lid]), step=0, **env),
            NewEvent(RunCompleted(success=False, summary="no", turns=3), **env),
            NewEvent(RunCompleted(success=True, summary="yes on retry", turns=5), **env),
            NewEvent(LessonDeduplicated(lesson_id=lid, lesson="l", category="error_recovery", new_use_count=2), **env),
            NewEvent(LessonPromoted(lesson_id=lid, lesson="l", use_count=5, triggered_domains=["a", "b", "c"]), **env),
            NewEvent(RunStarted(goal="still going"), run_id="extra2", domain="www.extra.test"),
        ]
    )
    store.close()
    return bench_json("duck_queries", "--ledger", str(path), "--repeat", "1")


def test_duckdb_and_sqlite_answer_alike(measured: dict[str, Any]) -> None:
    got = measured["answers"]
    assert set(got) == QUERIES
    for name, by_engine in got.items():
        assert by_engine["duckdb"], name
        assert by_engine["duckdb"] == by_engine["scanner"] == by_engine["sqlite"], name
    funnel = {stage: n for stage, n, _ in got["promotions funnel"]["sqlite"]}
    assert funnel["promoted"] == 1 and funnel["deduplicated"] >= 1
    assert all(row[2] > 0 for row in got["recall hit rate"]["sqlite"])  # hits on both kinds
    extra = next(r for r in got["run outcomes by domain"]["sqlite"] if r[0] == "www.extra.test")
    assert extra[1:5] == [2, 1, 0, 1]  # two runs: one passed on its last completion, one running


def test_figures_are_measured_and_positive(measured: dict[str, Any]) -> None:
    figures = measured["figures"]
    assert len(figures) == 2 * len(QUERIES) + 5
    assert_honest(figures)
    (size,) = [f for f in figures if f["name"] == "the mirror's file (analytics.duckdb)"]
    assert size["unit"] == "MB" and size["value"] > 0 and " 0 versions" not in size["note"]


def test_a_ledger_with_forgetting_is_refused(tmp_path: Path) -> None:
    store = build_ledger(tmp_path / "ledger.db", 200)
    store.append([NewEvent(SubjectForgotten(subject_kind="domain", subject="site1.com", reason="test"))])
    store.close()
    done = run_bench("duck_queries", "--ledger", str(tmp_path / "ledger.db"), "--repeat", "1", "--json")
    assert done.returncode != 0 and "forget" in done.stderr and not done.stdout
