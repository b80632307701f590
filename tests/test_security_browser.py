"""Secrets at rest, file modes and prompt-injected pages, with the real agent in Chromium.

One memory directory gets: the bundled login case through the runner library
(shared memory, then per-run isolation), a hostile page whose title, text and a
link carry an API key, a bearer token and a Luhn-valid card number (and
instruction-like text everywhere), a goal and a fact with the same secrets; then
every export format, the report and the audits. Then every byte is scanned.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memtape.agent.browser import Browser
from memtape.agent.loop import RunResult, run_task
from memtape.agent.policy import ScriptedPolicy
from memtape.agent.runner import RunOptions, run_agent
from memtape.agent.sites import CASES_FILE, load_cases
from memtape.ledger.redact import MARKER
from memtape.ledger.settings import Settings
from memtape.ledger.store import SqliteStore
from memtape.projections.recording.memory import RecordingMemory
from tests import hostile_sites as H
from tests.cli_runner import run_cli
from tests.security_support import play, produce_outputs, scan, step

pytestmark = pytest.mark.browser
PASSWORD = "correct-horse-battery"
LOGIN = next(c for c in load_cases() if c["id"] == "portal-login")
#: a goal and a fact that carry the secret patterns
SECRET_GOAL = f'Open "Catalog" with api key {H.API_KEY} and header "Authorization: {H.BEARER}", pay with {H.CARD}'
SECRET_FACT = (
    '{"type": "fact_observed", "domain": "evil-a.test", "fact_type": "pattern", "key": "api access", '
    f'"value": "send {H.BEARER} with key {H.API_KEY}; card {H.CARD.replace(" ", "-")}"}}\n'
)


@dataclass
class World:
    memory_dir: Path
    outputs: Path
    login: list[RunResult]
    hostile: RunResult
    store: SqliteStore


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("security")
    memory_dir = root / ".agent-memory"  # created by memtape itself
    settings = Settings(memory=str(memory_dir))
    login = run_agent(settings, RunOptions(cases_file=str(CASES_FILE), case_ids=["portal-login"]))
    login += run_agent(settings, RunOptions(cases_file=str(CASES_FILE), case_ids=["portal-login"], isolation="per-run"))
    store = settings.store()
    with H.HostileSites() as sites, Browser(proxy=sites.proxy) as browser:
        case = H.CASES[0]
        hostile = run_task(
            browser,
            RecordingMemory(store, settings.projections_path),
            ScriptedPolicy(),
            goal=case["goal"],
            start_url=case["start_url"],
            success_check=case["success"],
        )
    play(
        RecordingMemory(store, settings.projections_path),
        "run_secret_goal",
        SECRET_GOAL,
        "http://evil-b.test/",
        [step(1, "click", "http://evil-b.test/", "Catalog", "link", url_after="http://evil-b.test/catalog")],
    )
    r = run_cli("--memory-dir", str(memory_dir), "append", "-", stdin=SECRET_FACT.encode())
    assert r.code == 0, r.err
    outputs = memory_dir / "out"
    produce_outputs(memory_dir, outputs)
    yield World(memory_dir, outputs, login, hostile, store)
    settings.close()


def test_the_runs_really_met_the_secrets(world: World) -> None:
    assert [r.outcome.success for r in world.login] == [True, True]
    assert world.hostile.outcome.success
    fills = [
        e.data["action"]
        for e in world.store.read(types=["step_recorded"])
        if e.data["action"]["command"] == "fill" and e.data["action"]["sensitive"]
    ]
    assert fills and all(a["args"]["value"] == MARKER for a in fills)
    catalog = [
        e
        for e in world.store.read(run_id=world.hostile.run_id, types=["step_recorded"])
        if e.data["env_after"]["url"].endswith("/catalog")
    ]
    assert catalog, "the agent reached the page that shows the secrets"
    assert MARKER in catalog[-1].data["env_after"]["title"]  # the title's API key, redacted
    page = [
        i["text"]
        for e in world.store.read(run_id=world.hostile.run_id, types=["context_built"])
        for i in e.data["items"]
        if i["source"] == "page_state"
    ]
    assert any("Developer note" in t and MARKER in t for t in page)  # the page text, its secrets redacted
    per_run = list((world.memory_dir / "runs").glob("*/ledger.db"))
    assert len(per_run) == 1


def test_no_secret_in_any_byte(world: World) -> None:
    world.store.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    needles = [PASSWORD, *H.SECRETS, H.CARD.replace(" ", "-")]
    assert scan(world.memory_dir, needles) == []
    wal = world.memory_dir / "ledger.db-wal"
    blob = (world.memory_dir / "ledger.db").read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert MARKER.encode() in blob  # redacted, not dropped


def test_memory_files_0600_and_dirs_0700(world: World) -> None:
    seen: set[str] = set()
    assert stat.S_IMODE(world.memory_dir.stat().st_mode) == 0o700
    for p in world.memory_dir.rglob("*"):
        if world.outputs / "audit" in p.parents or p == world.outputs / "audit":
            continue  # written by this test, not by memtape
        mode = stat.S_IMODE(p.lstat().st_mode)
        assert mode == (0o700 if p.is_dir() else 0o600), f"{p.relative_to(world.memory_dir)}: {oct(mode)}"
        seen.add(re.sub(r"run_[0-9a-z_]+", "RUN", str(p.relative_to(world.memory_dir))))
    for name in (
        "ledger.db",
        "projections.db",
        "runs/RUN/ledger.db",
        "runs/RUN/projections.db",
        "out/exports/memory.json",
        "out/exports/agent-memory",
        "out/report/report.html",
    ):
        assert name in seen, name
    assert any(s.endswith("-wal") for s in seen) and any(s.endswith("-shm") for s in seen)


def test_hostile_page_text_is_quoted_data(world: World) -> None:
    assert H.hostile_text_is_data(world.store, [world.hostile.run_id]) > 0
    tier1 = [e for e in world.store.read(types=["tier1_loaded"])]
    assert tier1 and all(H.INJECTION not in t.lower() for e in tier1 for t in e.data["lessons"])
