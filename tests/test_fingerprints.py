"""A projection's fingerprint covers everything its fold executes: editing a helper the
fold calls, an upcaster or clock parsing changes the fingerprint, and a catch-up then rebuilds it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memtape.ledger.store import SqliteStore
from memtape.projections.cache.db import readable
from memtape.projections.cache.materialize import Catchup
from memtape.projections.folds import state
from memtape.projections.parameters import DEFAULT_POLICY
from memtape.projections.seeds import seed_lessons
from memtape.projections.writer import MemoryWriter


def _source_file(module_name: str) -> Path:
    spec = importlib.util.find_spec(module_name)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin)


def _forget_cached_versions() -> None:
    state._fold_sources.cache_clear()
    state.sources_digest.cache_clear()


@pytest.fixture
def edited(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[[str], None]]:
    """`edited(module)` makes the fingerprints read an edited copy of that module's source."""
    real = state._source

    def edit(module_name: str) -> None:
        copy = tmp_path / _source_file(module_name).name
        copy.write_bytes(_source_file(module_name).read_bytes() + b"\n# an edit\n")
        monkeypatch.setattr(state, "_source", lambda name: copy if name == module_name else real(name))
        _forget_cached_versions()

    yield edit
    monkeypatch.undo()
    _forget_cached_versions()


@pytest.mark.parametrize(
    "helper",
    [
        "memtape.projections.folds.steps",
        "memtape.ledger.events",
        "memtape.ledger.clock",
        "memtape.projections.text",
        "memtape.projections.folds.state",
    ],
)
def test_editing_what_the_short_term_fold_runs_changes_its_fingerprint(helper: str, edited) -> None:
    before = state.code_version("short_term")
    edited(helper)
    assert state.code_version("short_term") != before


def test_a_module_outside_the_closure_leaves_the_fingerprint(edited) -> None:
    before = state.code_version("short_term")
    edited("memtape.agent.policy")
    assert state.code_version("short_term") == before


def test_editing_steps_rebuilds_short_term(tmp_path: Path, edited) -> None:
    store = SqliteStore.open(tmp_path / "ledger.db")
    MemoryWriter(store).append(seed_lessons())
    proj = tmp_path / "projections.db"
    Catchup(store, proj, DEFAULT_POLICY).run()
    with readable(proj) as cache:
        before = cache.checkpoints["short_term"].fingerprint
    edited("memtape.projections.folds.steps")
    Catchup(store, proj, DEFAULT_POLICY).run()
    with readable(proj) as cache:
        assert cache.checkpoints["short_term"].fingerprint != before
        assert cache.checkpoints["short_term"].fingerprint == state.fingerprint("short_term", DEFAULT_POLICY)
    store.close()


def test_finding_a_closure_runs_none_of_it() -> None:
    """The mirror's closure holds ledger.location, which imports pgstore when a PostgreSQL URL is
    opened: its digest covers pgstore.py without running it (nor psycopg), as a name such as
    `memtape.ledger.pgstore.PostgresStore` is looked for only inside packages."""
    script = (
        "import json, sys\nfrom memtape.projections.folds import state\n"
        "files = [p.name for p in state._fold_sources('memtape.analytics.mirror')]\n"
        "print(json.dumps([files, sorted(m for m in sys.modules if m.startswith(('psycopg', 'memtape.ledger.pgstore')))]))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    files, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "pgstore.py" in files and "location.py" in files
    assert loaded == []
