"""The browser-use adapter end to end: the real browser-use package drives Debian's Chromium on
the bundled shop (offline), with a scripted chat model that records every message it is sent."""
from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

os.environ.setdefault("ANONYMIZED_TELEMETRY", "false")
os.environ.setdefault("BROWSER_USE_SETUP_LOGGING", "false")

from browser_use import Agent, BrowserProfile, BrowserSession  # noqa: E402
from browser_use.browser.profile import ProxySettings  # noqa: E402
from browser_use.llm.views import ChatInvokeCompletion  # noqa: E402

import memtape  # noqa: E402
from memtape.agent.sites import SitesServer  # noqa: E402
from memtape.integrations.browser_use import TAG, BrowserUseMemory  # noqa: E402

from .cli_runner import run_cli  # noqa: E402

pytestmark = pytest.mark.browser
SHOP = "http://shop.test/"
DEAD = "http://127.0.0.1:9/"  # Chromium refuses the port (net::ERR_UNSAFE_PORT): browser-use reports navigate failed


class ScriptedModel:
    """A browser-use chat model that plays a fixed list of turns and keeps what it was sent."""

    model = "scripted"
    provider = "scripted"
    name = "scripted"
    _verified_api_keys = True

    def __init__(self, turns: list[list[dict[str, Any]]]):
        self.turns = turns
        self.sent: list[list[str]] = []

    @property
    def model_name(self) -> str:
        return self.model

    async def ainvoke(self, messages: list[Any], output_format: Any = None, **kwargs: Any) -> ChatInvokeCompletion:
        self.sent.append([m.text if hasattr(m, "text") else str(m.content) for m in messages])
        actions = self.turns[min(len(self.sent), len(self.turns)) - 1]
        data = {"evaluation_previous_goal": "", "memory": "", "next_goal": f"turn {len(self.sent)}", "action": actions}
        return ChatInvokeCompletion(completion=output_format.model_validate(data) if output_format else json.dumps(data),
                                    usage=None)


def _turns(product: str) -> list[list[dict[str, Any]]]:
    return [[{"navigate": {"url": SHOP, "new_tab": False}}],
            [{"navigate": {"url": DEAD, "new_tab": False}}],
            [{"go_back": {}}],
            [{"navigate": {"url": f"{SHOP}product/{product}", "new_tab": False}}],
            [{"done": {"text": f"on the {product} page", "success": True}}]]


async def _run(memory_dir: Path, proxy: str, goal: str, product: str) -> tuple[ScriptedModel, BrowserUseMemory, Any]:
    scratch = memory_dir.parent  # the profile and downloads stay in the test's directory, not in /tmp
    profile = BrowserProfile(executable_path="/usr/bin/chromium", headless=True, chromium_sandbox=False,
                             user_data_dir=scratch / f"profile-{product}", downloads_path=scratch / f"downloads-{product}",
                             enable_default_extensions=False, proxy=ProxySettings(server=proxy),
                             args=["--disable-gpu", "--no-first-run", "--disable-background-networking",
                                   "--disable-component-update", "--disable-sync"])
    session = BrowserSession(browser_profile=profile)
    model = ScriptedModel(_turns(product))
    agent = Agent(task=goal, llm=model, browser_session=session, use_vision=False, use_judge=False)
    try:
        with memtape.open(memory_dir) as mem:
            adapter = BrowserUseMemory(mem, agent, start_url=SHOP)
            history = await adapter.run(max_steps=6)
    finally:
        await session.kill()
    return model, adapter, history


def test_browser_use_learns_in_one_run_and_is_told_in_the_next(sites: SitesServer, tmp_path: Path) -> None:
    memory_dir = tmp_path / "mem"
    model1, first, history1 = asyncio.run(_run(memory_dir, sites.proxy, 'Open "Wool Socks"', "socks"))
    assert history1.is_successful() and history1.final_result() == "on the socks page"
    run1 = first.memory_run.run_id

    with memtape.open(memory_dir) as mem:
        steps = list(mem.store.read(run_id=run1, types=["step_recorded"]))
        learned = list(mem.store.read(run_id=run1, types=["lesson_recorded"]))
        done = list(mem.store.read(run_id=run1, types=["run_completed"]))
    actions = [(e.data["action"]["command"], e.data["ok"]) for e in steps]
    assert actions == [("navigate", True), ("navigate", False), ("go_back", True), ("navigate", True)]
    assert steps[1].data["error"] == f"Navigation failed - site unavailable: {DEAD}"
    assert steps[3].data["env_after"]["url"] == f"{SHOP}product/socks"
    assert done[0].data["success"] is True and done[0].data["result"] == "on the socks page"
    # post-run learning: the failed navigate recovered by go_back is a lesson for the next run
    lesson = next(e for e in learned if e.data["failed_command"] == "navigate")
    assert lesson.data["learned_from"] == [steps[1].id, steps[2].id]

    model2, second, history2 = asyncio.run(_run(memory_dir, sites.proxy, 'Open "Rain Jacket"', "jacket"))
    assert history2.is_successful()
    run2 = second.memory_run.run_id
    # run 1 saw no memory of its own after the failed navigate; run 2 is told run 1's lesson right after it
    after_failure1 = "\n".join(model1.sent[2])
    assert lesson.data["lesson"] not in after_failure1
    before_failure2 = "\n".join(model2.sent[1])
    after_failure2 = "\n".join(model2.sent[2])
    assert lesson.data["lesson"] not in before_failure2.split(f"</{TAG}>")[-1]
    assert f"<{TAG}>" in after_failure2 and lesson.data["lesson"] in after_failure2
    # and in the system message from the first call: Tier 1 (the seed lessons), the shop's tips
    assert f"<{TAG}>" in model2.sent[0][0] and "Lessons from experience" in model2.sent[0][0]

    with memtape.open(memory_dir) as mem:
        contexts = list(mem.store.read(run_id=run2, types=["context_built"]))
        recalls = list(mem.store.read(run_id=run2, types=["error_recall"]))
    assert recalls and lesson.data["lesson_id"] in recalls[0].data["lesson_ids"]
    told = next(c for c in contexts if c.data["prompt"] == "step")
    item = next(i for i in told.data["items"] if i["source"] == "last_error")
    assert lesson.data["lesson"] in item["text"] and lesson.id in item["event_ids"]

    audit = run_cli("--memory-dir", str(memory_dir), "audit", run2, "--json")
    assert audit.code == 0, audit.err
    report = json.loads(audit.out)
    step = next(s for s in report["steps"] if s["step"] == told.step)
    origins = [o for p in step["prompt"] for i in p["items"] if i["source"] == "last_error" for o in i["origins"]]
    assert any(o["run_id"] == run1 and o["event_id"] == lesson.id for o in origins)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(agent=st.one_of(st.none(), st.integers(), st.text(max_size=5), st.builds(object)),
       start_url=st.one_of(st.none(), st.just(""), st.just("  "), st.integers(), st.just(SHOP)))
def test_bad_adapter_arguments_are_one_line_errors_and_write_nothing(tmp_path_factory: Any, agent: Any,
                                                                     start_url: Any) -> None:
    memory_dir = tmp_path_factory.mktemp("mem")
    with memtape.open(memory_dir) as mem:
        with pytest.raises(memtape.MemtapeError) as caught:
            BrowserUseMemory(mem, agent, start_url=start_url)
        assert "\n" not in str(caught.value) and str(caught.value).startswith(("agent must", "start_url must"))
        assert list(mem.store.read()) == []
