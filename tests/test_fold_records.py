"""The folds' frozen records built and evolved through their plain twin (`ledger.envelope.constructor`,
`projections.text.evolve` and `build`) are the records the dataclass itself makes: equal, of the
class, still frozen, each default factory called afresh."""

from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, dataclass, field, fields
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtape.ledger.envelope import RecordedEvent, constructor, recorded_event
from memtape.projections.folds.runs import RunManifest
from memtape.projections.folds.short_term import ShortTerm, empty_run
from memtape.projections.folds.steps import StepMemory
from memtape.projections.text import build, evolve

texts = st.text(max_size=8)
optional_texts = st.none() | texts


def manifests() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "run_id": texts,
            "session_id": optional_texts,
            "parent_run_id": optional_texts,
            "status": st.sampled_from(["running", "completed", "failed"]),
            "goal": texts,
            "domain": texts,
            "start_url": optional_texts,
            "final_url": optional_texts,
            "current_url": optional_texts,
            "started_at": texts,
            "updated_at": texts,
            "completed_at": optional_texts,
            "success": st.none() | st.booleans(),
            "summary": optional_texts,
            "artifact_paths": st.tuples(texts),
            "turn_count": st.integers(min_value=0, max_value=2**63 - 1),
            "result": optional_texts,
            "reason": optional_texts,
            "event_ids": st.tuples(texts, texts),
        },
        optional={"policy": st.dictionaries(texts, st.integers()), "tokens_in": st.integers(), "mode": texts},
    )


@given(manifests())
def test_a_record_built_through_its_twin_is_the_dataclass_record(values: dict[str, Any]) -> None:
    made = constructor(RunManifest)(**values)
    assert made == RunManifest(**values)
    assert type(made) is RunManifest and repr(made) == repr(RunManifest(**values))
    with pytest.raises(FrozenInstanceError):
        made.goal = "changed"  # type: ignore[misc]


def test_each_default_factory_is_called_afresh() -> None:
    make = constructor(RunManifest)
    required: dict[str, Any] = {
        f.name: f.name for f in fields(RunManifest) if f.default is f.default_factory is dataclasses.MISSING
    }
    first, second = make(**required), make(**required)
    assert first.policy == {} and first.policy is not second.policy
    ev = recorded_event(1, "e", "memory", 1, "lesson_seeded", 1, "t", "t", None, None, None, {}, "{}", "0", "h")
    assert (
        type(ev) is RecordedEvent
        and ev._model == []
        and ev._model is not recorded_event(*dataclasses.astuple(ev)[:15])._model
    )


@given(manifests(), manifests())
def test_evolve_is_dataclasses_replace(values: dict[str, Any], changes: dict[str, Any]) -> None:
    run = RunManifest(**values)
    changed = {k: v for k, v in changes.items() if k in ("status", "summary", "turn_count", "event_ids", "policy")}
    evolved = evolve(run, **changed)
    assert evolved == dataclasses.replace(run, **changed) and type(evolved) is RunManifest
    assert run == RunManifest(**values)  # the original is left as it was
    with pytest.raises(FrozenInstanceError):
        evolved.status = "x"  # type: ignore[misc]


def test_evolve_refuses_a_field_the_record_does_not_have() -> None:
    with pytest.raises(TypeError, match="no field 'colour'"):
        evolve(empty_run("r1"), colour="red")


def test_build_decodes_a_stored_row_with_its_defaults() -> None:
    memory = build(StepMemory, {"run_id": "r", "step": 2, "env_before": {}, "env_after": {}, "action": {},
                                "target_text": None, "outcome": "success", "reason": None, "correction": None,
                                "page_similarity": 0.0, "intent_similarity": 0.0, "score": 0.0, "event_ids": ["e1"]},
                   event_ids=("e1",))  # fmt: skip
    assert type(memory) is StepMemory and memory.event_ids == ("e1",) and memory.rep == 1 and memory.embedding == ()
    with pytest.raises(KeyError, match="ShortTerm.run_id missing"):
        build(ShortTerm, {"goal": "g"})


def test_a_class_that_is_not_a_plain_slotted_dataclass_is_refused() -> None:
    @dataclass(frozen=True)
    class Unslotted:
        a: int = 0

    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int = field(default=0)

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("negative")

    for cls in (Unslotted, Checked):
        with pytest.raises(TypeError, match="not a slotted dataclass built by its fields alone"):
            constructor(cls)
