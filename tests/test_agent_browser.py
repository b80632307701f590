"""End-to-end in real headless Chromium on the bundled sites (one browser for the module)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memtape.agent import prompt as P
from memtape.agent.browser import Browser
from memtape.agent.conversation import Message
from memtape.agent.decisions import recorded_decisions
from memtape.agent.loop import RunConfig, RunResult, run_task
from memtape.agent.policy import Decision, OpenAIPolicy, ScriptedPolicy
from memtape.agent.sites import HOSTILE_CASES_FILE, load_cases
from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import TrajectoryRecorded
from memtape.ledger.store import SqliteStore
from memtape.projections.budget import DEFAULT_BUDGET
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.replay import verify_decisions
from memtape.projections.view import MemoryView

pytestmark = pytest.mark.browser
CASES = {c["id"]: c for c in load_cases()}
PASSWORD = b"correct-horse-battery"


def run(
    browser: Browser,
    ledger: tuple[SqliteStore, Path],
    goal: str,
    url: str = "http://shop.test/",
    enabled: bool = True,
    check: dict[str, Any] | None = None,
    policy: Any = None,
    **kw: Any,
) -> RunResult:
    store, proj = ledger
    memory = RecordingMemory(store, proj, enabled=enabled)
    return run_task(browser, memory, policy or ScriptedPolicy(), goal=goal, start_url=url, success_check=check, **kw)


def events(store: SqliteStore, run_id: str, *types: str) -> list[Any]:
    return list(store.read(run_id=run_id, types=list(types) or None))


def test_the_cookie_dialog_is_read_off_the_page_and_decisions_re_derive(
    chromium: Browser, ledger: tuple[SqliteStore, Path]
) -> None:
    """The shop's consent banner is an open dialog in the page state: the policy closes it with its
    own button first, memory or not, so no click fails and no site tip is needed (nor learned)."""
    store, _ = ledger
    first = run(chromium, ledger, 'Open "Wool Socks"', check={"url_pattern": "/product/socks$"})
    assert first.outcome.success and first.errors == 0
    tier1 = events(store, first.run_id, "tier1_loaded")[0].data
    assert tier1["count"] == 3  # the seed lessons, loaded into the system prompt
    step1 = events(store, first.run_id, "step_recorded")[0].data
    assert step1["target"]["name"] == "Accept all cookies" and step1["ok"] and "memory" not in step1["think"]
    second = run(chromium, ledger, 'Open "Rain Jacket"', check={"url_pattern": "/product/jacket$"})
    assert second.outcome.success and second.errors == 0
    assert events(store, second.run_id, "step_recorded")[0].data["target"]["name"] == "Accept all cookies"
    learned = events(store, first.run_id, "lesson_recorded")
    assert not [e for e in learned if e.data["category"] == "site_specific"]  # nothing failed: nothing to learn
    check = verify_decisions(store)  # a real agent's decisions re-derive from the log
    assert check.ok and check.decisions >= 3, check


def test_replay_heals_selectors_and_hands_back(chromium: Browser, ledger: tuple[SqliteStore, Path]) -> None:
    store, proj = ledger
    goal = 'Open "Wool Socks"'
    run(chromium, ledger, goal)
    again = run(chromium, ledger, goal, check={"url_pattern": "/product/socks$"})
    assert (
        again.outcome.success
        and again.outcome.policy_decisions == 0
        and again.outcome.replayed_steps == again.outcome.turns
    )
    recalled = events(store, again.run_id, "trajectory_recalled")[0].data
    assert recalled["replay"] and recalled["similarity"] == 1.0

    view = MemoryView.open(store, proj)
    traj = view.trajectories("shop.test")[0]
    steps = [
        s.model_copy()
        for s in TrajectoryRecorded.model_validate({k: v for k, v in store.get(traj.event_ids[0]).data.items()}).steps
    ]
    stale = [s.model_copy(update={"selector": "#stale-id"}) if s.name == "Wool Socks" else s for s in steps]
    store.append(
        [
            NewEvent(
                TrajectoryRecorded(trajectory_id="traj_stale", goal=goal, origin="http://shop.test", steps=stale),
                domain="shop.test",
            )
        ]
    )
    healed = run(chromium, ledger, goal, check={"url_pattern": "/product/socks$"})
    assert healed.outcome.success and healed.outcome.policy_decisions == 0
    fix = [e.data for e in events(store, healed.run_id, "selector_succeeded") if e.data.get("healed_from")]
    assert fix == [{**fix[0], "healed_from": "#stale-id", "selector": "#p-socks", "role": "link", "name": "Wool Socks"}]

    gone = [s.model_copy(update={"name": "Wool Sox"}) if s.name == "Wool Socks" else s for s in steps]
    store.append(
        [
            NewEvent(
                TrajectoryRecorded(trajectory_id="traj_gone", goal=goal, origin="http://shop.test", steps=gone),
                domain="shop.test",
            )
        ]
    )
    back = run(chromium, ledger, goal, check={"url_pattern": "/product/socks$"})
    assert back.outcome.success and back.outcome.replayed_steps >= 1 and back.outcome.policy_decisions >= 1
    assert back.handback and "no longer on the page" in back.handback


def test_password_never_reaches_the_ledger(chromium: Browser, tmp_path: Path) -> None:
    case = CASES["portal-login"]
    store = SqliteStore.open(tmp_path / "ledger.db")
    for _ in range(2):  # the second run replays the login, typing the secret from the goal
        r = run(chromium, (store, tmp_path / "projections.db"), case["goal"], case["start_url"], check=case["success"])
        assert r.outcome.success
    assert r.outcome.replayed_steps > 0
    fills = [e.data["action"] for e in store.read(types=["step_recorded"]) if e.data["action"]["command"] == "fill"]
    assert any(a["sensitive"] and a["args"]["value"] == "[REDACTED]" for a in fills)
    MemoryView.open(store, tmp_path / "projections.db")
    store.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files and all(PASSWORD not in p.read_bytes() for p in files)


def _outside_fences(text: str) -> str:
    return re.sub(re.escape(P.FENCE_OPEN) + r".*?\n" + re.escape(P.FENCE_CLOSE) + r"(?=\n|$)", "", text, flags=re.S)


def test_hostile_page_text_stays_quoted_data(chromium: Browser, ledger: tuple[SqliteStore, Path]) -> None:
    store, proj = ledger
    rules, button = load_cases(HOSTILE_CASES_FILE)[:2]
    r = run(chromium, ledger, rules["goal"], rules["start_url"], check=rules["success"])
    r2 = run(chromium, ledger, button["goal"], button["start_url"], check=button["success"])
    assert r.outcome.success and r2.outcome.success and r2.errors == 0  # the second run dismissed the notice first
    seen_hostile = False
    for ev in [*events(store, r.run_id, "context_built"), *events(store, r2.run_id, "context_built")]:
        for item in ev.data["items"]:
            if item["source"] in ("system", "goal"):
                continue  # the user's own goal names the button; only page-derived text must be fenced
            seen_hostile |= "ignore previous instructions" in item["text"].lower()
            assert "ignore previous instructions" not in _outside_fences(item["text"]).lower(), item["source"]
    assert seen_hostile  # the page really said it, and it was fenced
    lessons = MemoryView.open(store, proj).lessons()
    assert all("ignore previous" not in l.lesson.lower() for l in lessons)
    site = [l for l in lessons if l.scope_domain == "forum.test"]
    assert site and site[0].category == "site_specific"
    other = run(chromium, ledger, 'Open "Wool Socks"')
    recalled = [i for e in events(store, other.run_id, "domain_recall") for i in e.data["lesson_ids"]]
    assert site[0].lesson_id not in recalled
    tier1 = events(store, other.run_id, "tier1_loaded")[0].data["lessons"]
    assert all("forum" not in t and "Dismiss" not in t for t in tier1)


class _Model(BaseHTTPRequestHandler):
    """A tiny 'model': accept cookies after an intercepted click, open the product, then finish."""

    def log_message(self, *a: Any) -> None:
        return

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        step = body["messages"][-1]["content"]

        def ref(name: str) -> str | None:
            m = re.search(r"^(\S+): \w+ - " + re.escape(name) + "$", step, re.M)
            return m.group(1) if m else None

        if "URL: http://shop.test/product/socks" in step:
            call = ("finish", {"result": "opened", "success": True})
        elif "IMPORTANT - Last action failed" in step and ref("Accept all cookies"):
            call = ("click", {"ref": ref("Accept all cookies")})
        else:
            call = ("click", {"ref": ref("Wool Socks")})
        out = {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": call[0], "arguments": json.dumps(call[1])},
                            }
                        ],
                    }
                }
            ],
            "usage": {"prompt_tokens": len(step) // 4, "completion_tokens": 9},
        }
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_openai_policy_drives_the_browser_via_a_stub_model(chromium: Browser, ledger: tuple[SqliteStore, Path]) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        policy = OpenAIPolicy(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", model="stub", api_key="k")
        r = run(
            chromium,
            ledger,
            'Open "Wool Socks"',
            enabled=False,
            policy=policy,
            check={"url_pattern": "/product/socks$"},
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert r.outcome.success and r.errors == 1 and r.outcome.policy_decisions == r.outcome.turns == 4
    assert r.outcome.tokens_out == 9 * 4 and r.outcome.tokens_in > 0


def _cli(tmp: Path, *args: str) -> Any:
    """Invoke the CLI in-process, on its own thread: the module's browser owns this thread's
    Playwright loop, and the command starts a browser of its own."""
    from memtape.cli import cli

    box: list[Any] = []
    t = threading.Thread(target=lambda: box.append(CliRunner().invoke(cli, ["--memory-dir", str(tmp), *args])))
    t.start()
    t.join(120)
    result = box[0]
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_cli_sessions_resume_fork_and_isolation(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    _cli(mem, "run", "--goal", 'Open "Wool Socks"', "--url", "http://shop.test/", "--session-id", "proj_1")
    store = SqliteStore.open(mem / "ledger.db")
    run1 = MemoryView.open(store, mem / "projections.db").runs(session_id="proj_1")[0]
    assert run1.success and run1.final_url == "http://shop.test/product/socks"
    _cli(mem, "run", "--resume-run", run1.run_id, "--task", 'Open "Cart"', "--memory-dir", str(mem))
    view = MemoryView.open(store, mem / "projections.db")
    resumed = next(r for r in view.runs() if r.mode == "resume")
    assert resumed.parent_run_id == run1.run_id and resumed.session_id == "proj_1" and resumed.success
    assert resumed.start_url == run1.final_url and resumed.final_url == "http://shop.test/cart"
    sessions = view.sessions("shop.test")
    assert [(s.session_id, s.run_id) for s in sessions] == [("proj_1", run1.run_id), ("proj_1", resumed.run_id)]
    ctx = [e for e in store.read(run_id=resumed.run_id, types=["context_built"]) if e.data["prompt"] == "system"][0]
    hist = next(i for i in ctx.data["items"] if i["source"] == "session_history")  # the run it resumes
    assert 'final URL: "http://shop.test/product/socks"' in hist["text"] and "proj_1" in hist["text"]
    store.close()
    assert "decisions re-derived" in _cli(mem, "verify", "--decisions").output

    out = _cli(mem, "run", "--fork-run", run1.run_id, "--goal", 'Open "Home"', "--memory-isolation", "per-run")
    assert "run_" in out.output
    run_dbs = list((mem / "runs").glob("*/ledger.db"))
    assert len(run_dbs) == 1  # the fork ran in a memory scope of its own
    own = SqliteStore.open(run_dbs[0])
    started = [e.data for e in own.read(types=["run_started"])]
    assert started[0]["isolation"] == "per-run" and started[0]["mode"] == "fork"
    assert started[0]["parent_run_id"] == run1.run_id and started[0]["session_id"].startswith("fork_")
    assert not list(own.read(types=["session_recorded"]))[0].data["session_id"].startswith("proj")
    own.close()


def test_fork_per_run_isolation_every_run_starts_from_the_fork(tmp_path: Path) -> None:
    """`fork --memory-isolation per-run`: runs in the fork each start from the forked memory in a
    ledger of their own; nothing they learn reaches the fork or each other."""
    a, b = tmp_path / "a", tmp_path / "b"
    cases = str(Path(__file__).resolve().parent.parent / "agent" / "sites" / "cases.json")
    _cli(a, "run", "--cases", cases, "--case", "shop-view-socks")
    source = SqliteStore.open(a / "ledger.db")
    until = source.head()
    out = _cli(a, "fork", "--until", str(until), "--out", str(b), "--memory-isolation", "per-run")
    assert f"forked {until} events" in out.output and "memory isolation per-run" in out.output
    assert json.loads((b / "fork.json").read_text())["memory_isolation"] == "per-run"

    _cli(b, "run", "--cases", cases, "--case", "shop-view-socks", "--case", "shop-add-shoes")
    forked = SqliteStore.open(b / "ledger.db")
    assert forked.head() == until  # the runs wrote to scopes of their own, not to the fork
    scopes = sorted((b / "runs").glob("*/ledger.db"))
    assert len(scopes) == 2
    base = [e.hash for e in source.read()]
    for path in scopes:
        own = SqliteStore.open(path)
        assert own.verify().ok
        evs = list(own.read())
        assert [e.hash for e in evs[:until]] == base  # starts from the forked memory, chain intact
        runs = {e.run_id for e in evs[until:]}
        assert len(runs) == 1  # only its own run: nothing leaked from the other arm
        started = [e.data for e in evs[until:] if e.type == "run_started"]
        assert started[0]["isolation"] == "per-run"
        if started[0]["goal"] == 'Open "Wool Socks"':
            # the forked memory is used: the socks trajectory recorded before the fork is recalled
            assert any(e.type == "trajectory_recalled" for e in evs[until:])
        own.close()
    forked.close()
    source.close()

    _cli(b, "run", "--cases", cases, "--case", "shop-view-socks", "--memory-isolation", "shared")
    forked = SqliteStore.open(b / "ledger.db")
    assert forked.head() > until and forked.verify().ok  # the flag overrides the fork's setting
    forked.close()


class SpyPolicy(ScriptedPolicy):
    """The scripted policy, keeping every conversation it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Message, ...]] = []

    def decide(self, messages: Sequence[Message]) -> Decision:
        self.seen.append(tuple(messages))
        return super().decide(messages)


def _calls(built: list[Any]) -> dict[int, dict[str, Any]]:
    """Step -> the items and trimmed items of its (last) call: the system prompt in force, then the step's message."""
    calls: dict[int, dict[str, Any]] = {}
    system: dict[str, Any] = {"items": [], "trimmed": []}
    for e in built:
        if e.data["prompt"] == "system":
            system = e.data
        else:
            calls[e.step] = {
                "items": [*system["items"], *e.data["items"]],
                "trimmed": [*system["trimmed"], *e.data["trimmed"]],
                "step": e.data,
            }
    return calls


def test_every_policy_sees_exactly_the_kept_items_of_its_prompt(
    chromium: Browser, ledger: tuple[SqliteStore, Path]
) -> None:
    """A policy is given its recorded prompts and its recorded replies, nothing else: the
    conversation each decision was asked on is the one the ledger gives back, to the character."""
    store, _ = ledger
    run(chromium, ledger, 'Open "Wool Socks"')  # teaches a trajectory, facts, selectors
    trimmed_memory = 0
    for budget, goal in ((2500, 'Open "Wool Socks" now'), (220, 'Open "Wool Socks" please')):
        spy = SpyPolicy()  # a goal close to the recorded one (trajectory offered, not replayed)
        result = run(chromium, ledger, goal, policy=spy, config=RunConfig(budget=budget))
        assert result.outcome.policy_decisions == len(spy.seen) >= 1
        recorded = recorded_decisions(store, result.run_id)
        assert [d.messages for d in recorded] == spy.seen
        built = events(store, result.run_id, "context_built")
        trimmed_memory += sum(
            1 for e in built for t in e.data["trimmed"] if t["source"] in ("domain_tips", "reference_trajectory")
        )
    assert trimmed_memory >= 1  # the small budget really took memory out of some prompt


def test_run_context_budget_flag_keeps_priorities_strict(tmp_path: Path) -> None:
    mem = tmp_path / "mem"
    _cli(mem, "run", "--goal", 'Open "Wool Socks"', "--url", "http://shop.test/")
    _cli(mem, "run", "--goal", 'Open "Rain Jacket"', "--url", "http://shop.test/", "--context-budget", "200")
    store = SqliteStore.open(mem / "ledger.db")
    runs = MemoryView.open(store, mem / "projections.db").runs()
    calls = list(_calls(list(store.read(run_id=runs[0].run_id, types=["context_built"]))).values())
    # the budget holds each call's memory and page sections, in the system prompt and the step's message
    # together (the instruction, Tier 1 and the goal are outside it)
    budgeted = [[i for i in c["items"] if i["source"] not in ("system", "tier1", "goal")] for c in calls]
    assert calls and all(
        c["step"]["budget"] == 200 and sum(i["tokens"] for i in b) <= 200 for c, b in zip(calls, budgeted)
    )
    for c, b in zip(calls, budgeted):
        for t in c["trimmed"]:
            assert all(k["priority"] >= t["priority"] for k in b)
    assert any(c["trimmed"] for c in calls)
    default = [e.data for e in store.read(run_id=runs[1].run_id, types=["context_built"]) if e.data["prompt"] == "step"]
    assert all(s["budget"] == DEFAULT_BUDGET for s in default)
    store.close()
    from memtape.cli import cli

    bad = CliRunner().invoke(
        cli, ["--memory-dir", str(mem), "run", "--goal", "x", "--url", "http://shop.test/", "--context-budget", "0"]
    )
    assert bad.exit_code == 2 and "--context-budget" in bad.output


def test_trayn_reps_within_a_session(chromium: Browser, ledger: tuple[SqliteStore, Path]) -> None:
    store, proj = ledger
    a = run(chromium, ledger, 'Open "Wool Socks"', session_id="S")
    b = run(chromium, ledger, 'Open "Rain Jacket"', session_id="T")
    c = run(chromium, ledger, 'Open "Wool Socks" again', session_id="S")  # a rep: the task again

    def reps(r: RunResult) -> set[int]:
        return {e.data["rep"] for e in events(store, r.run_id, "step_recorded")}

    def memory_items(r: RunResult) -> list[Any]:
        return [
            i
            for e in events(store, r.run_id, "context_built")
            for i in e.data["items"]
            if i["source"] == "step_memories"
        ]

    assert (reps(a), reps(b), reps(c)) == ({1}, {1}, {2})
    assert memory_items(a) == [] and memory_items(b) == []  # rep 1 is the baseline: no retrieval
    got = memory_items(c)
    assert got, "rep 2 retrieved graded steps of rep 1"
    taught_by = {store.get(i).run_id for item in got for i in item["event_ids"]}
    assert taught_by == {a.run_id}  # the session's previous rep only, never session T's run
    after = events(store, a.run_id, "step_recorded")[0].data["env_after"]
    assert after["page_type"] and after["elements"] and after["url"].startswith("http://shop.test/")
    # session T's run is the closest match to this goal: only the widened scope may retrieve it
    wide = run(chromium, ledger, 'Open "Rain Jacket" please', session_id="S", config=RunConfig(step_memory_scope="all"))
    assert reps(wide) == {3}
    widened = {store.get(i).run_id for item in memory_items(wide) for i in item["event_ids"]}
    assert b.run_id in widened, "the widened scope retrieves from other sessions too"
