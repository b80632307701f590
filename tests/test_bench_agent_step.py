"""bench/agent_step.py stays runnable in real Chromium: memory's share and context build are
measured beside the browser work of the same steps (no timing is asserted here)."""

from __future__ import annotations

import pytest

from tests.bench_cli import assert_honest, bench_json

pytestmark = pytest.mark.browser


def test_agent_step_bench_measures_memory_beside_the_step() -> None:
    figures = {f["name"].split(" (")[0]: f for f in bench_json("agent_step", "--case", "shop-view-socks")["figures"]}
    assert set(figures) == {
        "memory inside agent steps, cold",
        "memory inside agent steps, warm",
        "context build per policy step, p50",
        "context build per policy step, p99",
    }
    assert_honest(list(figures.values()))
    for label in ("cold", "warm"):  # memory time is a part of step time, never more
        f = figures[f"memory inside agent steps, {label}"]
        assert f["value"] < f["baseline_value"] and "% of step time" in f["note"]
    assert "items / fit / render / record" in figures["context build per policy step, p50"]["note"]
