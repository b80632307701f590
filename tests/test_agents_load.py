"""Load (issue 6): agent processes sharing one memory directory run bundled cases at once;
nothing is lost, seq is gapless, the chain verifies, incremental projections equal a rebuild,
and throughput is reported. `python bench/agents_load.py` runs the whole suite with 3 agents."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.agents_load import QUICK_CASES, run_load

pytestmark = [pytest.mark.stress, pytest.mark.browser]


def test_agents_sharing_one_memory_dir_lose_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = run_load(tmp_path / ".agent-memory", processes=2, case_ids=QUICK_CASES)
    assert r.errors == []
    assert r.per_process == {0: (3, 3, 0), 1: (3, 3, 0)} and not r.lost
    assert r.runs == 6 and r.gapless and r.verified and r.digests_equal
    assert r.events > 6 * 10
    with capsys.disabled():
        print(f"\n2 agents x {len(QUICK_CASES)} cases: {r.runs_per_s:.2f} runs/s, {r.events_per_s:.0f} events/s "
              f"({r.events} events in {r.seconds:.1f} s)")
