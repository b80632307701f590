"""Text from web pages is data everywhere it is printed: rich markup in a lesson, a fact, an error
or a prompt item (`[/ 75%]`, `[bold]`, `[link=...]`) is shown literally by every human-facing
command, never interpreted and never a crash."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.ledger.store import SqliteStore
from tests.cli_runner import run_cli
from tests.ledger_samples import sample_event

MARKUP = st.lists(
    st.sampled_from(
        [
            "[/ 75%]",
            "[bold]",
            "[/bold]",
            "[link=http://x.test]",
            "[/]",
            "[red on blue]",
            "[",
            "]",
            "\\[",
            "x",
            " ",
            ":smile:",
        ]
    ),
    min_size=1,
    max_size=6,
).map("".join)


def _ledger(memory: Path, text: str) -> None:
    env = {"run_id": "r1", "domain": "x.test"}
    with SqliteStore.open(memory / "ledger.db") as store:
        store.append(
            [
                sample_event("run_started", text, **env),
                sample_event("context_built", text, step=1, **env),
                sample_event("step_recorded", text, step=1, **env),
                sample_event("lesson_recorded", text, **env).__class__(
                    payload=sample_event("lesson_recorded", text).payload.model_copy(update={"scope_domain": "x.test"}),
                    **env,
                ),
                sample_event("fact_observed", text, **env),
                sample_event("selector_succeeded", text, **env),
            ]
        )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MARKUP)
def test_markup_in_memory_is_printed_literally(text: str) -> None:
    with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, {"COLUMNS": "2000"}):
        memory = Path(d)
        _ledger(memory, text)
        for args in (
            ["state", "lessons"],
            ["state", "facts", "--domain", "x.test"],
            ["audit", "r1"],
            ["audit", "r1", "--format", "table"],
            ["explain", "l2"],
            ["explain", "l2", "--format", "table"],
        ):
            r = run_cli("--memory-dir", str(memory), *args)
            assert r.code == 0 and "Traceback" not in r.err, (args, r.err)
            if args[0] != "state" or args[1] == "lessons":
                flat = " ".join(r.out.split())
                assert " ".join(text.split())[:12] in flat or not text.strip(), (args, text, r.out[:800])
