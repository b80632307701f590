"""Decisions are checkable: `memtape verify --decisions` re-derives every decision event in the log.

The log is replayed under the policy each run recorded; a decision the policy would not have made
(appended with --raw), one made differently, or one missing is named by its seq.
"""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import event
from memtape.ledger.events import FactObserved, LessonRecorded, RunCompleted, RunStarted
from memtape.ledger.store import SqliteStore
from memtape.projections.folds.lessons import TIER1_CATEGORIES
from memtape.projections.parameters import Thresholds
from memtape.projections.replay import verify_decisions
from memtape.projections.writer import MemoryWriter
from tests.analytics_builders import learning_ledger
from tests.cli_runner import run_cli


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five runs learning and promoting a lesson; 100 days later a run whose opening prunes and
    expires; then facts contradicted until one is pruned: every kind of decision."""
    mem = tmp_path_factory.mktemp("decisions") / "memory"
    mem.mkdir(mode=0o700)
    clock = SteppingClock()
    with SqliteStore.open(mem / "ledger.db", clock=clock) as store:
        learning_ledger(store, clock, runs=5)
        writer = MemoryWriter(store)
        writer.append(
            [
                event(
                    LessonRecorded(
                        lesson_id="",
                        lesson="Scroll the element into view first",
                        category="error_recovery",
                        failed_command="scroll",
                        error_pattern="not visible",
                    ),
                    domain="a.test",
                )
            ]
        )  # outside a run: run4 is finished
        clock.advance(timedelta(days=100))
        writer.open_for_run("late", clock.now.isoformat())
        writer.append([event(RunStarted(goal="late run"), run_id="late", domain="a.test")])
        for value in ("5s", "8s", "5s", "9s", "2s", "3s"):
            writer.append(
                [event(FactObserved(fact_type="timing", key="load", value=value), run_id="late", domain="a.test")]
            )
        writer.append([event(RunCompleted(success=True), run_id="late", domain="a.test")])
        types = {e.type for e in store.read()}
    assert {
        "lesson_seeded",
        "lesson_deduplicated",
        "lesson_promoted",
        "lessons_pruned",
        "trajectories_expired",
        "fact_contradicted",
        "facts_pruned",
    } <= types
    return mem


@pytest.fixture
def mem(learned: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "memory"
    shutil.copytree(learned, copy)
    return copy


def cli(mem: Path, *args: str, stdin: bytes | None = None) -> Any:
    return run_cli("--memory-dir", str(mem), *args, stdin=stdin)


def events(mem: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in cli(mem, "events", "--json").out.splitlines()]


def test_a_log_written_by_the_policy_re_derives(mem: Path) -> None:
    r = cli(mem, "verify", "--decisions")
    n = sum(
        1
        for e in events(mem)
        if e["type"]
        in {
            "lesson_seeded",
            "lesson_deduplicated",
            "lesson_promoted",
            "lessons_pruned",
            "trajectories_expired",
            "fact_contradicted",
            "facts_pruned",
        }
    )
    assert r.code == 0, r.err
    assert f", {n} decisions re-derived; head " in r.out


def _raw(mem: Path, line: dict[str, Any]) -> Any:
    return cli(mem, "append", "--raw", "-", stdin=orjson.dumps(line) + b"\n")


def test_a_raw_promotion_the_policy_would_not_make_is_named(mem: Path) -> None:
    lesson = next(e for e in events(mem) if e["type"] == "lesson_seeded")["payload"]
    r = _raw(
        mem,
        {
            "type": "lesson_promoted",
            "lesson_id": lesson["lesson_id"],
            "lesson": lesson["lesson"],
            "use_count": 1,
            "triggered_domains": ["a.test"],
            "from_category": "error_recovery",
            "to_category": "best_practice",
        },
    )
    assert r.code == 0, r.err
    seq = events(mem)[-1]["seq"]
    r = cli(mem, "verify", "--decisions")
    assert r.code == 1 and r.err.count("\n") == 1
    assert r.err.startswith(f"error: decision differs at seq {seq}: lesson_promoted")
    assert cli(mem, "verify").code == 0  # the chain itself is intact: only the decision is wrong


def test_a_decision_made_differently_is_named(mem: Path, tmp_path: Path) -> None:
    """A raw lesson_recorded that repeats a known lesson, followed by a dedup with the wrong count."""
    known = next(e for e in events(mem) if e["type"] == "lesson_recorded")
    lines = [
        {"type": "lesson_recorded", **{k: v for k, v in known["payload"].items()}, "domain": "z.test"},
        {
            "type": "lesson_deduplicated",
            "lesson_id": known["payload"]["lesson_id"],
            "lesson": known["payload"]["lesson"],
            "category": "error_recovery",
            "failed_command": known["payload"]["failed_command"],
            "error_pattern": known["payload"]["error_pattern"],
            "new_use_count": 99,
            "domain": "z.test",
        },
    ]
    assert cli(mem, "append", "--raw", "-", stdin=b"\n".join(orjson.dumps(l) for l in lines) + b"\n").code == 0
    seq = events(mem)[-1]["seq"]
    r = cli(mem, "verify", "--decisions")
    assert r.code == 1 and f"seq {seq}: lesson_deduplicated: the policy decides" in r.err


def test_a_missing_decision_is_named(mem: Path) -> None:
    known = next(e for e in events(mem) if e["type"] == "lesson_recorded")
    line = {"type": "lesson_recorded", **known["payload"], "domain": "z.test"}
    assert _raw(mem, line).code == 0  # the policy would have deduplicated it: --raw appended no decision
    seq = events(mem)[-1]["seq"]
    r = cli(mem, "verify", "--decisions")
    assert r.code == 1 and f"seq {seq + 1}: the policy's decision lesson_deduplicated" in r.err
    assert "missing" in r.err


def _run_with_policy(store: SqliteStore, policy: Thresholds, recorded: dict[str, Any]) -> None:
    writer = MemoryWriter(store, policy)
    writer.open_for_run("p1", "2026-02-01T00:00:00Z")
    writer.append([event(RunStarted(goal="g", policy=recorded), run_id="p1", domain="a.test")])
    for dom in ("a.test", "b.test"):
        writer.append(
            [
                event(
                    LessonRecorded(
                        lesson_id="",
                        lesson="Press Escape first",
                        category="error_recovery",
                        failed_command="click",
                        error_pattern="blocked",
                    ),
                    run_id="p1",
                    domain=dom,
                )
            ]
        )


def test_each_run_is_replayed_under_the_policy_it_recorded(tmp_path: Path) -> None:
    policy = Thresholds(promotion_min_uses=2, promotion_min_domains=2)
    with SqliteStore.open(tmp_path / "one.db", clock=SteppingClock()) as store:
        _run_with_policy(store, policy, {"decision_policy": "scripted", **policy.model_dump(mode="json")})
        assert "lesson_promoted" in {e.type for e in store.read()}
        assert verify_decisions(store).ok
    with SqliteStore.open(tmp_path / "two.db", clock=SteppingClock()) as store:
        _run_with_policy(store, policy, {})  # the same decisions, but the run says it used the default policy
        promoted = next(e.seq for e in store.read() if e.type == "lesson_promoted")
        check = verify_decisions(store)
        assert (check.ok, check.first_bad_seq) == (False, promoted)


def test_an_edited_ledger_is_refused_before_any_replay(mem: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(mem / "ledger.db")
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET payload = payload || ' ' WHERE seq = 7")
    conn.commit()
    conn.close()
    r = cli(mem, "verify", "--decisions")
    assert r.code == 1 and r.err.startswith("error: chain broken at seq 7:")


def test_imported_decisions_are_folded_not_checked(tmp_path: Path) -> None:
    """An import's decisions went through the source's own rules; later ones are the policy's again."""
    data = Path(__file__).resolve().parent / "data" / "interop" / "seed001"
    mem = tmp_path / "memory"
    for source in (data / "memory.json", data):
        assert cli(mem, "import", str(source)).code == 0
    # issue 38: the logs' own promotions are a note on the import, which applies the rule itself
    assert "lesson_promoted" not in {e["type"] for e in events(mem)}
    noted = [e["payload"]["counts"] for e in events(mem) if e["type"] == "memory_imported"]
    assert noted[-1]["given_promotions"] >= 1 and noted[-1]["promotions_decided"] == 0
    assert cli(mem, "append", "-", stdin=b'{"type":"run_started","run_id":"r1","goal":"g"}\n').code == 0
    r = cli(mem, "verify", "--decisions")
    # the event logs' import wrote the seed lesson memory.json lacked (as a run would), so the run's
    # opening decides only the pruning; memory.json's own Tier 1 lessons (another system's) came
    # through an import, not a seed, promotion or pin of this memory: verify names each of them
    tier1 = [e for e in events(mem) if e["type"] == "lesson_recorded" and e["payload"]["category"] in TIER1_CATEGORIES]
    assert r.code == 1 and "decision differs" not in r.err, r
    assert f"{len(tier1)} Tier 1 entries no seed, promotion or pin command made" in r.err, r
    assert all(f"seq {e['seq']} lesson_recorded {e['payload']['lesson_id']}: a " in r.err for e in tier1), r
    lesson = next(
        e for e in events(mem) if e["type"] == "lesson_recorded" and e["payload"]["category"] == "site_specific"
    )["payload"]
    assert (
        _raw(
            mem,
            {
                "type": "lesson_promoted",
                "lesson_id": lesson["lesson_id"],
                "lesson": lesson["lesson"],
                "use_count": 1,
                "triggered_domains": [],
                "from_category": "error_recovery",
                "to_category": "best_practice",
            },
        ).code
        == 0
    )
    assert f"seq {events(mem)[-1]['seq']}: lesson_promoted" in cli(mem, "verify", "--decisions").err
