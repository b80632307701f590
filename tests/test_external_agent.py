"""An external agent: a separate interpreter that imports only `memtape`, two runs where the
second recalls what the first learned, then an audit — and the README's quick start says the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memtape.projections.seeds import SEEDS
from tests.test_docs_python import python_blocks

AGENT = r"""
import json, sys
import memtape

SHOP = "https://shop.example/"
BLOCKED = "<div id=consent> intercepts pointer events"
mem = memtape.open(".agent-memory")
with mem.start_run(goal="Buy wool socks", start_url=SHOP) as first:
    first.tier1()
    first.recall_domain(step=1)
    first.record_step(step=1, action="click", target='button "Buy"', url=SHOP + "p/1", ok=False, error=BLOCKED)
    first.recall_error(command="click", error=BLOCKED, step=1)
    first.record_step(step=2, action="press", args={"key": "Escape"})
    first.record_step(step=3, action="click", target='button "Buy"', url_after=SHOP + "cart")
    first.record_lesson("Close the consent dialog before buying", category="site_specific",
                        scope_domain="shop.example", step=3)
    first.observe_fact(kind="quirk", key="consent dialog", value="blocks the Buy button", step=3)
    first.selector_result(element='button "Buy"', selector="#buy", ok=True, step=3)
    first.finish(success=True, outcome="bought")

with mem.start_run(goal="Buy wool socks", start_url=SHOP) as second:
    site = second.recall_domain(step=1)
    fix = second.recall_error(command="click", error=BLOCKED, step=1)
    ref = second.recall_trajectory(step=1)
    facts = [(f.key, f.value) for f in second.facts()]
    second.record_context(items=[{"source": "domain_tips", "text": site[0].text, "priority": 60,
                                  "event_ids": list(site[0].event_ids)}], step=1, budget=2500)
    second.record_step(step=1, action="press", args={"key": "Escape"}, url=SHOP + "p/1")
    second.finish(success=True, outcome="bought again")
audit = mem.audit(second.run_id, step=1)
print(json.dumps({
    "first": first.run_id, "second": second.run_id,
    "site": [l.text for l in site], "fix": [l.text for l in fix],
    "replay": ref.replay, "ref_steps": [s.command for s in ref.trajectory.steps], "facts": facts,
    "prompt_from": [o["run_id"] for i in audit["steps"][0]["prompt"][0]["items"] for o in i["origins"]],
    "runs": [(r.run_id, r.status) for r in mem.state("runs")],
    "layers": sorted(m for m in sys.modules if m.split(".")[0] in ("agent", "analytics", "ledger", "projections")),
}))
mem.close()
"""


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTAPE_")}
    return subprocess.run(
        [sys.executable, "-"], input=code, cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )


def test_an_external_agent_learns_in_one_run_and_recalls_in_the_next(tmp_path: Path) -> None:
    done = run_python(AGENT, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["site"][0] == "Close the consent dialog before buying"
    assert out["fix"] == [
        "When click fails with '<div id=consent> intercepts pointer events', try press(key='Escape').",
        SEEDS[1][0],
        SEEDS[2][0],
    ]
    assert out["replay"] and out["ref_steps"] == ["press", "click", "finish"]
    assert ["consent dialog", "blocks the Buy button"] in out["facts"]
    assert out["prompt_from"] == [out["first"]]  # the audit names the run that taught the tip
    assert out["runs"] == [[out["second"], "completed"], [out["first"], "completed"]]
    assert out["layers"] == []  # nothing but memtape.* was imported
    assert (tmp_path / ".agent-memory" / "ledger.db").is_file()


def test_the_readme_example_prints_what_it_says(tmp_path: Path) -> None:
    # the guide "Learning across runs" (docs/guide-learning.md), which goes on from the README's quick start
    (code,) = [b.code for b in python_blocks() if "# Run 2: the same task" in b.code]
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("site tips: ['An overlay on this site intercepts clicks until its button")
    assert lines[1] == "replay: True ['click', 'click', 'finish']"
    assert lines[2] == "on this error: " + repr(
        ["If a banner intercepts a click, accept the banner, then click again.", SEEDS[1][0], SEEDS[2][0]]
    )
    assert lines[3].startswith("domain_tips <- ['run_") and lines[3].count("run_") == 1
    assert len(lines) == 5
