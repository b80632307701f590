"""Load: agent processes sharing one memory directory run bundled cases at once;
nothing is lost, seq is gapless, the chain verifies, incremental projections equal a rebuild,
and throughput is reported beside the same cases in one process. `python bench/agents_load.py`
runs the whole suite with 3 agents; this runs it with 2 agents and 3 cases."""

from __future__ import annotations

import pytest

from tests.bench_cli import bench_json

pytestmark = [pytest.mark.stress, pytest.mark.browser]
CASES = ["shop-view-socks", "search-padel", "portal-login"]


def test_agents_sharing_one_memory_dir_lose_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    out = bench_json("agents_load", "--processes", "2", *[a for case in CASES for a in ("--case", case)], timeout=900)
    shared, single = out["shared"], out["single"]
    assert shared["errors"] == [] and single["errors"] == []
    assert shared["per_process"] == {"0": [3, 3, 0], "1": [3, 3, 0]} and not shared["lost"]
    assert shared["runs"] == 6 and shared["gapless"] and shared["verified"] and shared["digests_equal"]
    assert shared["events"] > 6 * 10 and single["runs"] == 3 and not single["lost"]
    rates = {f["name"]: f for f in out["figures"]}
    assert rates["2 agents: runs/s"]["value"] > 0 and rates["2 agents: runs/s"]["baseline_value"] > 0
    with capsys.disabled():
        print(
            f"\n2 agents x {len(CASES)} cases: {rates['2 agents: runs/s']['value']:.2f} runs/s, "
            f"{rates['2 agents: events/s']['value']:.0f} events/s ({shared['events']} events in {shared['seconds']:.1f} s)"
        )
