"""The public API (`memtape.open`): the contract calls as the README spells them, what each one
logs, two runs where the second recalls what the first learned, stale runs, bad arguments."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtape
from memtape.api import Memory
from memtape.ledger.clock import SteppingClock
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import count_tokens, token_counter
from memtape.projections.recording.checks import plain
from tests.cli_runner import run_cli

SHOP = "https://shop.example/"
INTERCEPT = "element <div class=cookie-banner> intercepts pointer events"


def types(mem: Any, run_id: str | None = None) -> list[str]:
    return [e.type for e in mem.store.read(run_id=run_id)]


def the_contract(mem: Any) -> str:
    """The API's contract, call for call."""
    with mem.start_run(goal="Buy wool socks", start_url="https://shop.example/", session_id=None) as run:
        assert run.run_id.startswith("run_")
        tier1 = run.tier1()
        assert tier1 and all(isinstance(l, memtape.Lesson) for l in tier1)
        assert run.recall_domain(step=1) == []
        run.record_step(
            step=1,
            action="click",
            target='button "Buy"',
            url="https://shop.example/p/1",
            ok=False,
            error="element intercepts pointer events",
        )
        assert run.url == "https://shop.example/p/1"
        hits = run.recall_error(command="click", error="element intercepts pointer events", step=1)
        assert all(isinstance(l, memtape.Lesson) for l in hits)
        run.record_lesson(
            "Accept the cookie banner before clicking Buy",
            category="error_recovery",
            failed_command="click",
            error_pattern="intercepts pointer events",
            step=2,
        )
        run.observe_fact(kind="quirk", key="cookie banner", value="blocks clicks until accepted", step=2)
        run.selector_result(element='button "Buy"', selector="#buy", ok=True, step=3)
        run.record_context(
            items=[{"source": "domain_tips", "text": "...", "priority": 60, "event_ids": []}], step=1, budget=2500
        )
        run.finish(success=True, outcome="bought")
    return run.run_id


def test_the_contract_calls_log_what_they_did(tmp_path: Path) -> None:
    mem = memtape.open(str(tmp_path / "mem"))
    run_id = the_contract(mem)
    logged = types(mem)
    assert logged[:4] == ["lesson_seeded"] * 3 + ["run_started"]  # the start-of-run policy, then the run
    run_types = types(mem, run_id)
    for t in (
        "tier1_loaded",
        "domain_recall",
        "step_recorded",
        "error_recall",
        "lesson_recorded",
        "fact_observed",
        "selector_succeeded",
        "context_built",
        "session_recorded",
        "step_graded",
        "run_completed",
    ):
        assert t in run_types, t
    step = next(e for e in mem.store.read(types=["step_recorded"]))
    assert step.data["target"] == {"role": "button", "name": "Buy", "selector": None}
    assert (step.domain, step.data["ok"], step.data["env_before"]["url"]) == ("shop.example", False, SHOP + "p/1")
    sel = next(e for e in mem.store.read(types=["selector_succeeded"]))
    assert (sel.data["role"], sel.data["name"], sel.data["selector"], sel.step) == ("button", "Buy", "#buy", 3)
    ctx = next(e for e in mem.store.read(types=["context_built"]))
    assert ctx.data["items"][0]["source"] == "domain_tips" and ctx.data["budget"] == 2500
    assert ctx.data["items"][0]["tokens"] == 1 == ctx.data["total_tokens"]  # "..." estimated: 3 chars, 4 a token
    fact = mem.state("facts", domain="shop.example")
    assert [(f.key, f.value) for f in fact] == [("cookie banner", "blocks clicks until accepted")]
    assert mem.state("runs")[0].status == "completed"
    mem.close()


def test_state_audit_experiment_equal_their_json_commands(tmp_path: Path) -> None:
    d = str(tmp_path / "mem")
    with memtape.open(d) as mem:
        run_id = the_contract(mem)
        lessons, early = mem.state("lessons", as_of=None, domain=None), mem.state("lessons", as_of=3)
        audit = mem.audit(run_id, step=None)
        experiment = mem.experiment({"promotion_min_uses": 3}, until=None)
    assert plain(lessons) == json.loads(run_cli("--memory-dir", d, "state", "lessons", "--json").out)
    assert plain(early) == json.loads(run_cli("--memory-dir", d, "state", "lessons", "--as-of", "3", "--json").out)
    assert len(early) == 3 and len(lessons) == 4
    assert [(l.source, l.error_pattern) for l in lessons if l.failed_command == "click"] == [
        ("seed", "intercepts pointer"),
        ("learned", "intercepts pointer events"),
    ]
    assert audit == json.loads(run_cli("--memory-dir", d, "audit", run_id, "--json").out)
    assert [s["step"] for s in audit["steps"]] == [0, 1]  # system prompt, then the one action
    cli = json.loads(run_cli("--memory-dir", d, "experiment", "--set", "promotion_min_uses=3", "--json").out)
    assert experiment == cli and experiment["policy"]["promotion_min_uses"] == 3


def overlay_steps(run: Any) -> None:
    """A click an overlay intercepts, Escape, the overlay accepted, the click again."""
    run.record_step(step=1, action="click", target='link "Wool Socks"', ok=False, error=INTERCEPT, selector="#socks")
    run.record_step(step=2, action="press", args={"key": "Escape"})
    run.record_step(step=3, action="click", target='button "Accept all cookies"', selector="#accept")
    run.record_step(step=4, action="click", target='link "Wool Socks"', selector="#socks", url_after=SHOP + "socks")


def overlay_run(mem: Any, goal: str) -> Any:
    """One run with something to learn: a recovery, a site lesson, a fact, selectors, a trajectory."""
    with mem.start_run(goal=goal, start_url=SHOP) as run:
        run.recall_domain(step=1)
        overlay_steps(run)
        learned = run.finish(success=True, outcome="socks page open")
    return run, learned


def test_a_second_run_recalls_what_the_first_learned(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    first, learned = overlay_run(mem, 'Open "Wool Socks"')
    # Escape came next but "Accept all cookies" is what the click worked after: the site's lesson, no Escape
    assert first.url == SHOP + "socks" and [l.category for l in learned.lessons] == ["site_specific"]
    with mem.start_run(goal='Open "Wool Socks"', start_url=SHOP) as second:
        site = second.recall_domain(step=1)
        assert len(site) == 1 and '"Accept all cookies"' in site[0].text and site[0].scope_domain == "shop.example"
        fix = second.recall_error(command="click", error=INTERCEPT, step=1)
        assert [(l.source, l.failed_command, l.error_pattern, l.matched, l.score) for l in fix] == [
            ("seed", "click", "intercepts pointer", "pattern+command", 5.0),
            ("seed", None, "intercepts pointer", "pattern", 3.0),
        ]
        recalled = second.recall_trajectory(step=1)
        assert recalled is not None and recalled.replay and recalled.similarity == 1.0
        assert [s.command for s in recalled.trajectory.steps] == ["press", "click", "click", "finish"]
        assert [f.key for f in second.facts()] == ["blocking overlay"]
        second.finish(success=True, outcome="done")
    recall = [e for e in mem.store.read(run_id=second.run_id, types=["domain_recall"])][0]
    assert recall.data["lesson_ids"] == [site[0].lesson_id]
    audit = mem.audit(second.run_id, step=1)
    shown = next(r for r in audit["steps"][0]["memory"]["recalled"] if r["kind"] == "domain")
    assert [l["lesson_id"] for l in shown["lessons"]] == [site[0].lesson_id]
    assert shown["lessons"][0]["taught_by"]["run_id"] == first.run_id  # where the second run's tip came from
    mem.close()


def test_leaving_the_block_by_an_exception_finishes_the_run_as_failed(tmp_path: Path) -> None:
    mem = memtape.open(tmp_path / "mem")
    with pytest.raises(KeyError, match="cart"), mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
        run.record_step(step=1, action="click", target='button "Buy"')
        raise KeyError("cart")
    done = mem.state("runs")[0]
    assert (done.status, done.reason, done.summary) == ("failed", "exception", "KeyError: 'cart'")
    assert done.turn_count == 1
    with mem.start_run(goal="Buy wool socks", start_url=SHOP) as quiet:
        pass
    assert mem.state("runs")[0].run_id == quiet.run_id and mem.state("runs")[0].reason == "unfinished"
    with pytest.raises(memtape.MemtapeError, match="is finished"):
        quiet.record_step(step=1, action="click")
    mem.close()


def test_a_run_finished_in_another_process_learns_what_it_would_have_learned_in_this_one(tmp_path: Path) -> None:
    here, there = memtape.open(tmp_path / "a"), memtape.open(tmp_path / "b")
    _run, learned_here = overlay_run(here, 'Open "Wool Socks"')
    with there.start_run(goal='Open "Wool Socks"', start_url=SHOP) as run:
        overlay_steps(run)
        reattached = Memory(there.store, there.projections_path).run(run.run_id)
        assert reattached.url == SHOP + "socks" and len(reattached.steps) == 4
        learned_there = reattached.finish(success=True, outcome="socks page open")
        run.finished = True  # the other process finished it

    def learned(l: Any) -> Any:
        return ([x.model_dump(exclude={"learned_from"}) for x in l.lessons], l.facts, l.trajectory.steps)

    assert learned(learned_there) == learned(learned_here)
    step_ids = [e.id for e in there.store.read(run_id=run.run_id, types=["step_recorded"])]
    assert learned_there.lessons[0].learned_from == [step_ids[0], step_ids[2]]  # the failure and what cleared it
    with pytest.raises(memtape.MemtapeError, match="already completed"):
        there.run(run.run_id)
    here.close(), there.close()


def test_stale_runs_are_abandoned_when_the_next_run_starts(tmp_path: Path) -> None:
    clock = SteppingClock("2026-03-01T00:00:00Z")
    store = SqliteStore.open(tmp_path / "ledger.db", clock=clock)
    mem = Memory(store, tmp_path / "projections.db", stale_after=timedelta(hours=1))
    crashed = mem.start_run(goal="Buy wool socks", start_url=SHOP)
    crashed.record_step(step=1, action="click", target='link "Wool Socks"', ok=False, error=INTERCEPT)
    clock.now += timedelta(minutes=59)
    alive = mem.start_run(goal="Read the news", start_url="https://news.example/")
    assert {r.run_id: r.status for r in mem.current().runs()} == {crashed.run_id: "running", alive.run_id: "running"}
    clock.now += timedelta(minutes=30)  # crashed: 89 minutes quiet; alive: 30
    assert mem.abandon_stale_runs() == [crashed.run_id]
    gone = mem.current().run(crashed.run_id)
    assert gone is not None and (gone.status, gone.reason) == ("failed", "abandoned")
    assert gone.summary and gone.summary.startswith("abandoned: no activity since 2026-03-01T00:00:0")
    clock.now += timedelta(hours=2)
    mem.start_run(goal="Buy wool socks", start_url=SHOP)  # the start-of-run sweep
    assert mem.current().run(alive.run_id).status == "failed"  # type: ignore[union-attr]
    store.close()


def events_in(path: Path) -> int:
    store = SqliteStore.open(path / "ledger.db")
    try:
        return sum(1 for _ in store.read())
    finally:
        store.close()


BAD_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("record_step", {"step": -1, "action": "click"}),
    ("record_step", {"step": 1, "action": ""}),
    ("record_step", {"step": 1, "action": "click", "ok": "yes"}),
    ("record_step", {"step": True, "action": "click"}),
    ("record_step", {"step": 1, "action": "click", "error": "nul\x00byte"}),
    ("record_step", {"step": 1, "action": "click", "args": ["not", "a", "dict"]}),
    ("record_lesson", {"text": ""}),
    ("record_lesson", {"text": "x", "category": "wisdom"}),
    ("record_lesson", {"text": "x", "failed_command": 3}),
    ("record_lesson", {"text": "x", "category": "site_specific", "scope_domain": "a b"}),
    ("observe_fact", {"kind": "rumour", "key": "k", "value": "v", "step": 1}),
    ("observe_fact", {"kind": "quirk", "key": "", "value": "v"}),
    ("selector_result", {"element": 'button "Buy"', "selector": "", "ok": True}),
    ("selector_result", {"element": 'button "Buy"', "selector": "#b", "ok": 1}),
    ("selector_result", {"element": 'button "Buy"', "selector": "#b", "ok": True, "url": 7}),
    ("record_context", {"items": [{"source": "x", "text": "t"}], "step": 1}),
    ("record_context", {"items": [{"source": "x", "text": "t", "priority": 1, "colour": "red"}], "step": 1}),
    ("record_context", {"items": "not a list", "step": 1}),
    ("record_context", {"items": [{"source": "x", "text": "t", "priority": 1, "tokens": -1}], "step": 1}),
    ("record_context", {"items": [], "step": 1, "budget": -5}),
    ("recall_error", {"command": "", "error": "boom", "step": 1}),
    ("recall_error", {"command": "click", "error": None, "step": 1}),
    ("recall_domain", {"step": 1, "domain": "not a domain/path"}),
    ("recall_domain", {"step": -3}),
    ("finish", {"success": "yes"}),
]


@pytest.mark.parametrize(("method", "kwargs"), BAD_CALLS, ids=[f"{m}-{i}" for i, (m, _) in enumerate(BAD_CALLS)])
def test_bad_arguments_raise_one_line_and_write_nothing(tmp_path: Path, method: str, kwargs: dict[str, Any]) -> None:
    mem = memtape.open(tmp_path / "mem")
    run = mem.start_run(goal="Buy wool socks", start_url=SHOP)
    before = sum(1 for _ in mem.store.read())
    with pytest.raises(memtape.MemtapeError) as err:
        getattr(run, method)(**kwargs)
    assert "\n" not in str(err.value) and str(err.value)
    assert sum(1 for _ in mem.store.read()) == before
    mem.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    goal=st.one_of(
        st.just(""), st.just("   "), st.integers(), st.none(), st.text(max_size=3).map(lambda t: t + "\x00")
    ),
    url=st.one_of(st.just(SHOP), st.none(), st.integers()),
)
def test_a_run_that_cannot_start_writes_nothing(tmp_path: Path, goal: Any, url: Any) -> None:
    d = tmp_path / "mem"
    with memtape.open(d) as mem, pytest.raises(memtape.MemtapeError) as err:
        mem.start_run(goal=goal, start_url=url)
    assert "\n" not in str(err.value)
    assert events_in(d) == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    step=st.one_of(st.integers(max_value=-1), st.booleans(), st.floats(), st.text(max_size=4), st.none()),
    target=st.one_of(st.none(), st.text(max_size=30)),
    error=st.one_of(st.none(), st.text(max_size=30)),
)
def test_record_step_accepts_or_refuses_cleanly(tmp_path: Path, step: Any, target: Any, error: Any) -> None:
    """Any step/target/error either records exactly one event or raises MemtapeError having written none."""
    with memtape.open(tmp_path / f"mem{abs(hash((repr(step), target, error)))}") as mem:
        run = mem.start_run(goal="Buy wool socks", start_url=SHOP)
        before = sum(1 for _ in mem.store.read())
        try:
            run.record_step(step=step, action="click", target=target, ok=error is None, error=error)
        except memtape.MemtapeError as exc:
            assert "\n" not in str(exc)
            assert sum(1 for _ in mem.store.read()) == before
        else:
            assert isinstance(step, int) and not isinstance(step, bool) and step >= 0
            assert sum(1 for _ in mem.store.read()) == before + 1
        run.finished = True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    vector=st.one_of(
        st.lists(st.floats(min_value=-9e18, max_value=9e18), min_size=1, max_size=5),
        st.lists(st.one_of(st.floats(), st.booleans(), st.text(max_size=3), st.none(), st.integers()), max_size=5),
        st.just([0.5] * 8193),
        st.just([1e19]),
        st.text(max_size=5),
        st.integers(),
        st.none(),
    ),
    model=st.one_of(st.just("m1"), st.just(""), st.none(), st.integers()),
)
def test_use_embedding_accepts_or_refuses_cleanly(tmp_path: Path, vector: Any, model: Any) -> None:
    """A vector of 1 to 8,192 finite numbers within the ledger's range, with a model name, is
    recorded in every later step; anything else is refused in one line and no step carries it."""
    with memtape.open(tmp_path / f"mem{abs(hash((repr(vector), repr(model))))}") as mem:
        run = mem.start_run(goal="Buy wool socks", start_url=SHOP)
        good = (
            isinstance(vector, list)
            and 0 < len(vector) <= 8192
            and isinstance(model, str)
            and model.strip() != ""
            and all(type(x) in (int, float) and abs(x) <= 9e18 for x in vector)
        )
        try:
            run.use_embedding(vector, model)
        except memtape.MemtapeError as exc:
            assert not good and "\n" not in str(exc)
        else:
            assert good
        run.record_step(step=1, action="click")
        recorded = [e.data for e in mem.store.read(types=["step_recorded"])][0]
        assert recorded["internal_state"] == "Buy wool socks"
        assert (recorded["internal_state_embedding"], recorded["embedding_model"]) == (
            ([float(x) for x in vector], model) if good else ([], None)
        )
        run.finished = True


def test_bad_questions_to_memory_raise_one_line(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        for call in (
            lambda: mem.state("moods"),
            lambda: mem.state("lessons", as_of=-1),
            lambda: mem.state("lessons", as_of=True),
            lambda: mem.audit("run_nope"),
            lambda: mem.audit("", step=1),
            lambda: mem.experiment({"promotion_min_uses": "many"}),
            lambda: mem.experiment({"no_such_knob": 1}),
            lambda: mem.run("run_nope"),
            lambda: mem.recall_error("click", "x", run_id="run_nope"),
        ):
            with pytest.raises(memtape.MemtapeError) as err:
                call()
            assert "\n" not in str(err.value)
        assert sum(1 for _ in mem.store.read()) == 0
    with pytest.raises(memtape.MemtapeError):
        memtape.open("")
    with pytest.raises(memtape.MemtapeError):
        memtape.open(tmp_path / "x", policy={"promotion_min_uses": 3})  # type: ignore[arg-type]
    for bad in ({"tier1_cap": "many"}, {"no_such_knob": 1}, {"trace_scoring": [1]}):
        with pytest.raises(memtape.MemtapeError, match="^policy\\.") as err:
            memtape.Policy(**bad)
        assert "\n" not in str(err.value)


def test_a_policy_is_applied_and_recorded(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem", policy=memtape.Policy(tier1_cap=2, recall_top_k=1)) as mem:
        with mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
            assert len(run.tier1()) == 2
            assert len(run.recall_error(command="fill", error="too many arguments", step=1)) == 1
            run.finish(success=False, outcome="gave up")
        started = next(mem.store.read(types=["run_started"]))
        assert started.data["policy"]["tier1_cap"] == 2 and started.data["policy"]["decision_policy"] == "external"


def test_the_api_names_no_bundled_agent_types() -> None:
    import inspect

    forbidden = ("StepRecord", "EnvState", "BudgetItem", "RunResult")
    for cls in (memtape.Memory, memtape.Run):
        for name, fn in inspect.getmembers(cls, inspect.isfunction):
            if not name.startswith("_"):
                sig = str(inspect.signature(fn))
                assert not any(f in sig for f in forbidden), (cls.__name__, name, sig)


HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.just(2**70),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["\x00", "", " ", "click", "shop.example", "quirk"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
RUN_METHODS = {
    "record_step": (
        ("step", "action"),
        (
            "target",
            "url",
            "ok",
            "error",
            "args",
            "url_after",
            "selector",
            "sensitive",
            "duration_ms",
            "think",
            "page_before",
            "page_after",
            "decided_by",
            "in_shadow",
            "memory_ms",
        ),
    ),  # rep: the run's own (start_run)
    "record_lesson": (("text",), ("category", "failed_command", "error_pattern", "scope_domain", "step")),
    "observe_fact": (("kind", "key", "value"), ("step", "domain")),
    "selector_result": (("element", "selector", "ok"), ("step", "error", "url", "healed_from")),
    "record_context": (("items", "step"), ("budget", "trimmed", "prompt", "domain")),
    "recall_error": (("command", "error"), ("step", "domain")),
    "recall_domain": ((), ("step", "domain")),
    "recall_trajectory": ((), ("step", "url")),
    "finish": (
        ("success",),
        (
            "outcome",
            "reason",
            "result",
            "final_url",
            "turns",
            "tokens_in",
            "tokens_out",
            "duration_ms",
            "policy_decisions",
            "replayed_steps",
        ),
    ),
}


@pytest.fixture(scope="module")
def shared_memory(tmp_path_factory: pytest.TempPathFactory) -> Any:
    mem = memtape.open(tmp_path_factory.mktemp("hostile") / "mem")
    yield mem
    mem.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), method=st.sampled_from(sorted(RUN_METHODS)))
def test_any_argument_is_recorded_or_refused_with_nothing_written(shared_memory: Any, data: Any, method: str) -> None:
    """Whatever an agent passes, a Run method either works or raises MemtapeError (one line) having
    written nothing — never another exception."""
    required, optional = RUN_METHODS[method]
    kwargs = {name: data.draw(HOSTILE, label=name) for name in required}
    for name in data.draw(st.lists(st.sampled_from(optional), unique=True, max_size=4), label="optional"):
        kwargs[name] = data.draw(HOSTILE, label=name)
    run = shared_memory.start_run(goal="Buy wool socks", start_url=SHOP)
    before = shared_memory.store.head()
    try:
        getattr(run, method)(**kwargs)
    except memtape.MemtapeError as exc:
        assert str(exc) and "\n" not in str(exc)
        assert shared_memory.store.head() == before
    if not run.finished:
        run.finish(success=False)


@pytest.mark.postgres
def test_memory_on_a_postgresql_ledger(pg_url: str) -> None:
    with memtape.open(pg_url) as mem:
        first, learned = overlay_run(mem, 'Open "Wool Socks"')
        with mem.start_run(goal='Open "Wool Socks"', start_url=SHOP) as second:
            site = second.recall_domain(step=1)
            recalled = second.recall_trajectory(step=1)
            second.finish(success=True, outcome="done")
        assert [l.lesson_id for l in site] == [l.lesson_id for l in learned.lessons if l.scope_domain]
        assert recalled is not None and recalled.replay
        assert [r.status for r in mem.state("runs")] == ["completed", "completed"]
        shown = next(
            r for r in mem.audit(second.run_id, step=1)["steps"][0]["memory"]["recalled"] if r["kind"] == "domain"
        )
        assert shown["lessons"][0]["taught_by"]["run_id"] == first.run_id


MEMORY_METHODS = {
    "start_run": (
        ("goal", "start_url"),
        ("session_id", "run_id", "parent_run_id", "mode", "isolation", "case_id", "agent"),
    ),
    "recall_error": (("command", "error"), ("domain", "run_id", "step")),
    "recall_domain": (("domain",), ("run_id", "step")),
    "tier1": ((), ("run_id", "step", "domain")),
    "recall_trajectory": (("goal", "url"), ("run_id", "step")),
    "run": (("run_id",), ()),
    "finish_run": (("run_id", "success"), ("outcome", "reason")),
    "abandon_stale_runs": ((), ("older_than",)),
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), method=st.sampled_from(sorted(MEMORY_METHODS)))
def test_any_argument_to_memory_is_answered_or_refused_with_nothing_written(
    shared_memory: Any, data: Any, method: str
) -> None:
    """The calls behind `memtape start-run|finish-run|recall`, with whatever an agent passes."""
    required, optional = MEMORY_METHODS[method]
    kwargs = {name: data.draw(HOSTILE, label=name) for name in required}
    chosen = st.lists(st.sampled_from(optional), unique=True, max_size=4) if optional else st.just([])
    for name in data.draw(chosen, label="optional"):
        kwargs[name] = data.draw(HOSTILE, label=name)
    before = shared_memory.store.head()
    try:
        getattr(shared_memory, method)(**kwargs)
    except memtape.MemtapeError as exc:
        assert str(exc) and "\n" not in str(exc)
        assert shared_memory.store.head() == before


def test_a_prompt_is_recorded_with_the_agents_own_token_counts_and_what_was_trimmed(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
            run.record_context(
                items=[
                    {"source": "page_state", "text": "Buy page", "priority": 80, "tokens": 120},
                    {"source": "facts", "text": "x" * 40, "priority": 30, "content_type": "json"},
                ],
                trimmed=[{"source": "step_memories", "text": "old", "priority": 20, "tokens": 900}],
                step=2,
                budget=200,
            )
            run.finish(success=True)
        ctx = next(e for e in mem.store.read(types=["context_built"]))
        facts = count_tokens("x" * 40, "json")  # counted here: the agent gave no count
        assert [(i["source"], i["tokens"]) for i in ctx.data["items"]] == [("page_state", 120), ("facts", facts)]
        assert ctx.data["total_tokens"] == 120 + facts and ctx.data["trimmed"][0]["tokens"] == 900
        assert ctx.data["counted_by"] == token_counter()
        assert (ctx.step, ctx.domain, ctx.data["prompt"]) == (2, "shop.example", "step")
        prompt = mem.audit(run.run_id, step=2)["steps"][0]["prompt"][0]
        assert [i["source"] for i in prompt["items"]] == ["page_state", "facts"]


def test_the_error_kinds_are_memtape_names_a_caller_can_catch(tmp_path: Path) -> None:
    """A caller catches the kind it can act on by its public name: a refused value, a run it may not
    write, an item that is not there, an extra to install (which `except ImportError` catches too)."""
    for kind in (memtape.InvalidEvent, memtape.RunConflict, memtape.UnknownItem, memtape.MissingExtra):
        assert issubclass(kind, memtape.MemtapeError) and kind.__module__.startswith("memtape.")
    assert issubclass(memtape.MissingExtra, ImportError)
    with pytest.raises(ImportError, match=r"pip install 'memtape\[server\]'"):
        raise memtape.MissingExtra("serve", "server")
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
            with pytest.raises(memtape.InvalidEvent):
                run.record_step(step=1, action="click", target="x" * 100_001)
            run.finish(success=True, outcome="done")
        with pytest.raises(memtape.RunConflict):
            run.record_step(step=2, action="click")
        with pytest.raises(memtape.UnknownItem):
            mem.explain("lsn_nope")
