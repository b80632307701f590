"""Poisoning: hostile pages on three domains (and the bundled forum) put instruction-like text in
titles, element names, overlay HTML (so in Playwright's errors) and error messages. Enough runs
to promote a lesson: the injected text never reaches Tier 1, is never recalled on another
domain, and every prompt quotes or fences it."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtape.agent.browser import Browser
from memtape.agent.loop import run_task
from memtape.agent.policy import ScriptedPolicy
from memtape.agent.sites import CASES_FILE, HOSTILE_CASES_FILE, load_cases
from memtape.ledger.store import SqliteStore
from memtape.projections.recording.memory import RecordingMemory
from memtape.projections.text import domain_matches
from memtape.projections.view import MemoryView
from tests import hostile_sites as H

pytestmark = [pytest.mark.browser, pytest.mark.stress]


def test_injected_text_never_promoted_nor_recalled_elsewhere(tmp_path: Path) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db")
    proj = tmp_path / "projections.db"
    bundled = {c["id"]: c for c in load_cases(CASES_FILE)}
    cases = (
        [c for c in H.CASES if c["id"].endswith("-catalog")]
        + load_cases(HOSTILE_CASES_FILE)
        + [bundled["shop-view-socks"], H.CASES[0]]
    )
    runs: list[tuple[str, str]] = []
    with H.HostileSites() as sites, Browser(proxy=sites.proxy) as browser:
        for c in cases:
            r = run_task(
                browser,
                RecordingMemory(store, proj),
                ScriptedPolicy(),
                goal=c["goal"],
                start_url=c["start_url"],
                success_check=c.get("success"),
                case_id=c["id"],
            )
            assert r.outcome.success, (c["id"], r.outcome.reason)
            runs.append((c["id"], r.run_id))

    view = MemoryView.open(store, proj)
    poisoned = [l for l in view.lessons() if H.INJECTION in l.lesson.lower()]
    assert poisoned, "the hostile dismiss button was learned (as quoted data) in a site lesson"
    # the runs were enough to promote it, were it unscoped: the same text learned on three sites (the
    # policy clears an overlay by its own button, so no Escape recovery reinforces a Tier 1 seed)
    assert len({l.scope_domain for l in poisoned}) >= 3
    assert all(l.scope_domain in H.HOSTS and l.category == "site_specific" for l in poisoned)
    assert all(H.INJECTION not in l.lesson.lower() for l in view.tier1())
    for ev in store.read(types=["tier1_loaded"]):
        assert all(H.INJECTION not in t.lower() for t in ev.data["lessons"])
    by_id = {l.lesson_id: l for l in poisoned}
    for ev in store.read(types=["domain_recall", "error_recall"]):
        for lid in ev.data["lesson_ids"]:
            if lid in by_id:
                assert domain_matches(ev.domain, by_id[lid].scope_domain), (ev.type, ev.domain, by_id[lid].scope_domain)
    shop = dict(runs)["shop-view-socks"]
    assert all(
        H.INJECTION not in t.lower()
        for ev in store.read(run_id=shop, types=["domain_recall"])
        for t in ev.data["lessons"]
    )
    # the last run, back on evil-a.test, got its site tip: the text was recalled there, quoted
    tips = [t for ev in store.read(run_id=runs[-1][1], types=["domain_recall"]) for t in ev.data["lessons"]]
    assert any(H.INJECTION in t.lower() for t in tips)
    assert H.hostile_text_is_data(store, [rid for _, rid in runs]) > 0
    store.close()
