"""`memtape serve` warms its caches before it says where it listens: projections.db caught up
with the ledger and every projection's state decoded into what the process keeps, so that the
first request after start pays neither (projections/recording/warming.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import memtape
from memtape import progress
from memtape.ledger.jsonl import parse_event
from memtape.ledger.store import SqliteStore
from memtape.projections.cache import materialize
from memtape.projections.cache.db import readable
from memtape.projections.folds.state import PROJECTIONS
from memtape.projections.recording.warming import CATCHING_UP, DECODING, INDEXING, warm
from memtape.projections.search import SearchIndex
from memtape.projections.state_rows import STATE_KINDS
from memtape.projections.view import MemoryView
from tests.server_support import live_server

SHOP = "https://shop.example/"


def _memory_behind(location: Path) -> int:
    """A memory whose projections.db was current once, then events appended by another writer (as
    an agent's process appends while no server runs); returns the ledger's head."""
    with memtape.open(location) as mem:
        with mem.start_run(goal="buy socks", start_url=SHOP) as run:
            run.record_step(step=1, action="click", target='button "Buy"', ok=False, error="element detached")
            run.record_step(step=2, action="click", target='button "Buy"')
            run.finish(success=True, outcome="bought")
        assert mem.state("runs")  # projections.db made current here
    lines = [
        {"type": "fact_observed", "domain": "shop.example", "fact_type": "quirk", "key": f"k{i}", "value": "v"}
        for i in range(3)
    ]
    with SqliteStore.open(location / "ledger.db", create=False) as store:
        store.append([parse_event(line) for line in lines])
        return int(store.head())


def _checkpoint_seqs(location: Path) -> set[int]:
    with readable(location / "projections.db") as cache:
        return {cp.seq for name, cp in cache.checkpoints.items() if name in PROJECTIONS}


def _read_without_catch_up(read: Callable[[], Any]) -> tuple[list[str], Any]:
    """The projections `read` decoded, and what it returned; a catch-up fails it."""
    decoded: list[str] = []
    real = materialize.decode

    def counting(name: str, raw: bytes) -> Any:
        decoded.append(name)
        return real(name, raw)

    with (
        mock.patch.object(materialize, "decode", counting),
        mock.patch.object(materialize.Catchup, "run", side_effect=AssertionError("a read caught up")),
    ):
        return decoded, read()


def test_a_warmed_memory_answers_every_state_with_no_catch_up_and_nothing_decoded(tmp_path: Path) -> None:
    head = _memory_behind(tmp_path / "mem")
    assert _checkpoint_seqs(tmp_path / "mem") != {head}
    with memtape.open(tmp_path / "mem") as mem:
        told: list[tuple[str, int, int]] = []
        assert warm(mem, lambda what, done, total: told.append((what, done, total))) == head
        assert told[0] == (CATCHING_UP, 0, len(PROJECTIONS)) and told[-1] == (
            DECODING,
            len(PROJECTIONS),
            len(PROJECTIONS),
        )
        assert [w for w, _, _ in told if w.startswith(f"{DECODING} ")] == [f"{DECODING} {n}" for n in PROJECTIONS]
        assert _checkpoint_seqs(tmp_path / "mem") == {head}
        decoded, answers = _read_without_catch_up(lambda: {kind: mem.state(kind) for kind in STATE_KINDS})
        assert decoded == []
        assert [f.key for f in answers["facts"] if f.key.startswith("k")] == ["k0", "k1", "k2"]
        assert len(answers["runs"]) == 1


def test_a_warmed_memory_recalls_and_searches_without_opening_or_indexing_again(tmp_path: Path) -> None:
    _memory_behind(tmp_path / "mem")
    with memtape.open(tmp_path / "mem") as cold:
        expected = [(h.kind, h.item_id, h.score) for h in cold.search("k1 quirk")]
    assert expected  # the facts another writer appended are found
    with memtape.open(tmp_path / "mem") as mem:
        told: list[tuple[str, int, int]] = []
        warm(mem, lambda what, done, total: told.append((what, done, total)))
        assert told[-2:] == [
            (INDEXING, len(PROJECTIONS), len(PROJECTIONS)),
            (DECODING, len(PROJECTIONS), len(PROJECTIONS)),
        ]
        with (
            mock.patch.object(MemoryView, "open", side_effect=AssertionError("the recall path opened a view")),
            mock.patch.object(SearchIndex, "__init__", side_effect=AssertionError("an index was built whole")),
        ):
            assert [(h.kind, h.item_id, h.score) for h in mem.search("k1 quirk")] == expected
            with mem.start_run(goal="buy socks again", start_url=SHOP) as run:
                assert run.recall_error(command="click", error="element detached", step=1) is not None
                run.finish(success=True)


def test_warming_a_current_memory_decodes_each_state_once(tmp_path: Path) -> None:
    _memory_behind(tmp_path / "mem")
    with memtape.open(tmp_path / "mem") as mem:
        warm(mem)
        decoded, head = _read_without_catch_up(lambda: warm(mem))  # again: current, every state kept
        assert (decoded, head) == ([], mem.store.head())


def test_a_memory_without_projections_is_left_as_it_is(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        mem.projections_path = None
        told: list[tuple[str, int, int]] = []
        assert warm(mem, lambda *a: told.append(a)) == 0
        assert told == [(DECODING, len(PROJECTIONS), len(PROJECTIONS))]  # a progress line still ends


@pytest.mark.timeout(120)
def test_serve_is_caught_up_before_it_answers_anyone(tmp_path: Path) -> None:
    head = _memory_behind(tmp_path / "mem")
    with live_server(tmp_path / "mem") as served:
        # the server answered only /openapi.json, which reads no memory: the catch-up was its start's
        assert _checkpoint_seqs(tmp_path / "mem") == {head}
        assert "memtape: viewer: " in served.announced
        with served.client() as client:
            facts = client.get("/state/facts").json()
    assert sorted(f["key"] for f in facts if f["key"].startswith("k")) == ["k0", "k1", "k2"]


@pytest.mark.parametrize("terminal", [True, False])
def test_a_long_warm_up_draws_one_line_on_a_terminal_only(
    terminal: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1" if terminal else "0")
    monkeypatch.setattr(progress, "WARM_LINE_AFTER", 0.05)
    with progress.warm_up_line() as told:
        told(CATCHING_UP, 0, len(PROJECTIONS))
        time.sleep(0.5)  # a long warm-up: the line is drawn meanwhile
        told(f"{DECODING} runs", 5, len(PROJECTIONS))
        told(DECODING, len(PROJECTIONS), len(PROJECTIONS))
        err = capsys.readouterr().err
        told(DECODING, len(PROJECTIONS), len(PROJECTIONS))  # ended: nothing more is drawn
    assert capsys.readouterr().err == ""
    if terminal:
        assert "memtape: warming caches catching up" in err and "ready" in err and "15/15" in err
    else:
        assert err == ""


def test_a_short_warm_up_draws_nothing(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    with progress.warm_up_line() as told:
        told(CATCHING_UP, 0, len(PROJECTIONS))
        told(DECODING, len(PROJECTIONS), len(PROJECTIONS))
    time.sleep(progress.WARM_LINE_AFTER + 0.2)  # the line's timer was cancelled with the warm-up
    assert capsys.readouterr().err == ""
