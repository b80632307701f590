"""A recall on error inside a run counts as a use only where the decisions after it cleared the
failure (issue 34, item 5): its lessons wait (`pending_ids`) and the run's end writes
`lessons_used` for the recalls whose obstacle went away. Through the public API, on every fold
that reads uses (state, Tier 1 promotion, explain, the audit's export filter)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import memtape
from memtape.analytics.forget_filter import Forgotten
from memtape.api import Memory
from memtape.ledger.events import ItemCredited
from memtape.projections.forgetting import forget
from memtape.projections.recording.learning import cleared_recalls
from memtape.projections.recording.values import StepRecord
from tests.test_recovery_outcomes import credited

INTERCEPT = '<div id="promo"> intercepts pointer events'
TIP = "When click fails with 'intercepts pointer events', press Escape first."
SITES = [f"shop{n}.example" for n in range(1, 7)]


def taught(mem: Memory) -> str:
    with mem.start_run(goal="Open the offer", start_url="http://teacher.example/") as run:
        lid = run.record_lesson(TIP, failed_command="click", error_pattern="intercepts pointer events", step=1)
        run.finish(success=True)
    return lid


def use_count(mem: Memory, lid: str) -> int:
    return next(l.use_count for l in mem.state("lessons") if l.lesson_id == lid)


def run_on(mem: Memory, site: str, *, cleared: bool, finish: bool = True) -> None:
    """A click blocked by a promo, the recall on its error, one Escape, then the same click again:
    it works (`cleared`) or fails the same way (Escape "succeeded" and changed nothing)."""
    url = f"http://{site}/"
    run = mem.start_run(goal="Open the offer", start_url=url)
    run.record_step(step=1, action="click", target='link "Offer"', ok=False, error=INTERCEPT)
    run.recall_error(command="click", error=INTERCEPT, step=1)
    run.record_step(step=2, action="press", args={"key": "Escape"})
    if cleared:
        run.record_step(step=3, action="click", target='link "Offer"', url_after=url + "offer")
    else:
        run.record_step(step=3, action="click", target='link "Offer"', ok=False, error=INTERCEPT)
    if finish:
        run.finish(success=cleared, learn=False)


def test_a_recall_whose_obstacle_stayed_is_no_use_on_six_sites(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        lid = taught(mem)
        for site in SITES:
            run_on(mem, site, cleared=False)
        recalls = list(mem.store.read(types=["error_recall"]))
        assert len(recalls) == 6
        assert all(lid in r.data["pending_ids"] and r.data["counted_ids"] == [] for r in recalls)
        assert list(mem.store.read(types=["lessons_used"])) == []
        assert use_count(mem, lid) == 1  # recorded once, never used
        assert list(mem.store.read(types=["lesson_promoted"])) == []


def test_a_recall_whose_obstacle_cleared_counts_once_and_promotes_on_five_uses(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        lid = taught(mem)
        for site in SITES[:4]:
            run_on(mem, site, cleared=True)
        used = list(mem.store.read(types=["lessons_used"]))
        assert [(e.data["recall_step"], e.data["cleared_at"], lid in e.data["lesson_ids"]) for e in used] == [
            (1, 2, True)
        ] * 4
        assert [e.domain for e in used] == SITES[:4]
        assert use_count(mem, lid) == 5
        (promoted,) = mem.store.read(types=["lesson_promoted"])
        assert promoted.data["lesson_id"] == lid
        assert next(l for l in mem.state("lessons") if l.lesson_id == lid).category == "best_practice"
        stages = [entry["stage"] for entry in mem.explain(lid)["life"]]
        assert stages.count("used") == 4


def test_an_unfinished_run_counts_nothing_and_a_recall_outside_a_run_counts_at_once(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        lid = taught(mem)
        run_on(mem, SITES[0], cleared=True, finish=False)
        assert use_count(mem, lid) == 1
        mem.recall_error("click", INTERCEPT, domain=SITES[1])
        assert use_count(mem, lid) == 2


def test_a_lesson_with_positive_credit_counts_at_the_recall_zero_credit_never(tmp_path: Path) -> None:
    for turns, cleared, uses in ((2, False, 2), (0, True, 1)):
        with memtape.open(tmp_path / f"mem{turns}") as mem:
            lid = taught(mem)
            mem.append([mem.event(ItemCredited, {**credited(lid, "run_x", turns).payload.model_dump()})])
            run_on(mem, SITES[0], cleared=cleared)
            (recall,) = mem.store.read(types=["error_recall"])
            assert (lid in recall.data["counted_ids"], lid in recall.data["pending_ids"]) == (turns > 0, False)
            assert use_count(mem, lid) == uses  # positive credit: counted at the recall; zero: never


def test_a_forgotten_lesson_leaves_no_use_behind(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        lid = taught(mem)
        run_on(mem, SITES[0], cleared=True)
        forget(mem.store, "lesson", lid, reason="test")
        assert all(l.lesson_id != lid for l in mem.state("lessons"))
        gone = Forgotten.scan(mem.store)
        for ev in mem.store.read(types=["lessons_used", "error_recall"]):
            shown = gone.shown(ev)
            assert shown is None or lid not in str(shown[3])


def step(n: int, command: str, ok: bool, target: str | None = 'link "Offer"') -> StepRecord:
    role, name = ("link", "Offer") if target else (None, None)
    return StepRecord(
        n, command, {}, ok, None if ok else INTERCEPT, "http://a.example/", "http://a.example/", role, name
    )


class _Recall:
    """Just what `cleared_recalls` reads of an `error_recall` event."""

    type = "error_recall"
    domain = "a.example"

    def __init__(self, n: int) -> None:
        self.step = n
        self.occurred_at = "2026-01-01T00:00:00.000Z"
        self.data: dict[str, Any] = {"pending_ids": ["lsn_x"]}


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["click", "press", "fill"]), st.booleans()), min_size=1, max_size=8))
def test_uses_are_counted_only_for_a_failure_that_later_cleared_with_no_failure_between(
    plan: list[tuple[str, bool]],
) -> None:
    steps = [step(i + 1, cmd, ok) for i, (cmd, ok) in enumerate(plan)]
    recalls = [_Recall(s.step) for s in steps]
    for _cls, fields, at, _domain in cleared_recalls(steps, recalls):  # type: ignore[arg-type]
        i = fields["recall_step"] - 1
        k = fields["cleared_at"] - 1
        assert not steps[i].ok and at == steps[k].step and k > i
        assert all(s.ok for s in steps[i + 1 : k + 1])
        later = [s for s in steps[k + 1 :] if s.command == steps[i].command]
        assert any(s.ok for s in steps[i + 1 :] if s.command == steps[i].command) or later == []
    never_failed = all(ok for _c, ok in plan)
    if never_failed:
        assert cleared_recalls(steps, recalls) == []  # type: ignore[arg-type]
