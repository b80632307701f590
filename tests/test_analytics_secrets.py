"""Secrets in odd places never reach the analytics mirror nor an analytics answer: planted through
`memtape append` (as any caller writes) in dict keys, nested lists, URL query strings and
fragments, long texts, envelope fields and the fields analytics shows (goals, final URLs, lesson
texts, recall snippets), no secret part is found in analytics.duckdb (bytes and values) nor in any
analysis in any format."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.analytics.answers import analyse_all
from memtape.analytics.queries import ANALYSES
from memtape.ledger.location import MIRROR_FILE
from memtape.ledger.store import SqliteStore
from tests import secret_shapes as S
from tests.cli_runner import run_cli
from tests.security_support import scan

O, A, G, W = S.OPENAI, S.ANTHROPIC, S.GITHUB, S.AWS_SECRET
NEEDLES = [O, A, G, W, S.AWS_ID, S.LOGIN_PASSWORD]


def _odd_places() -> list[dict[str, Any]]:
    long_text = "x" * 90_000 + f" {O} " + "y" * 500
    return [
        {
            "type": "run_started",
            "run_id": "r1",
            "domain": "shop.test",
            "session_id": "s1",
            "goal": f"Log in using {A}",
            "start_url": f"http://shop.test/login?api_key={G}&x=1#access_token={W}",
        },
        {
            "type": "step_recorded",
            "run_id": "r1",
            "step": 1,
            "domain": "shop.test",
            "ok": False,
            "error": long_text,
            "action": {
                "command": "fill",
                "args": {"ref": "e1", "list": [[{S.AWS_ID: "v"}, [O, {"nested": [A]}]]], "password": S.LOGIN_PASSWORD},
            },
        },
        {
            "type": "fact_observed",
            "domain": "shop.test",
            "fact_type": "pattern",
            "key": f"url http://x.test/?token={G}",
            "value": f"http://x.test/cb#code=1&access_token={W}",
        },
        {
            "type": "lesson_recorded",
            "run_id": "r1",
            "domain": "shop.test",
            "lesson_id": "",
            "category": "site_specific",
            "lesson": f"Use the key {O} then click",
            "failed_command": "click",
            "error_pattern": f"token {A} expired",
        },
        {
            "type": "error_recall",
            "run_id": "r1",
            "step": 1,
            "domain": "shop.test",
            "command": "click",
            "error_snippet": f"bad key {O}",
            "lesson_ids": [],
            "lessons": [],
            "matched": 0,
        },
        {
            "type": "run_completed",
            "run_id": "r1",
            "domain": "shop.test",
            "success": True,
            "summary": f"done {G}",
            "final_url": f"http://shop.test/home#id_token={W}",
            "turns": 1,
        },
        {
            "type": "session_recorded",
            "run_id": "r1",
            "domain": "shop.test",
            "session_id": "s1",
            "goal": f"g {O}",
            "outcome": "ok",
            "success": True,
            "final_url": f"http://shop.test/?password={S.LOGIN_PASSWORD}",
            "turns_used": 1,
            "duration_ms": 1,
            "timestamp": "2026-01-01T00:00:00Z",
        },
    ]


def _plant_and_scan(
    memory: Path, lines: list[dict[str, Any]], needles: list[str], formats: tuple[str, ...] = ("json", "csv", "table")
) -> list[tuple[str, str]]:
    """Append `lines` as a caller would, answer every analysis in `formats` (none: every analysis
    through the library, as JSON) and find `needles` in the mirror and the answers."""
    r = run_cli(
        "--memory-dir", str(memory), "append", "-", stdin=b"".join(orjson.dumps(line) + b"\n" for line in lines)
    )
    assert r.code == 0, r.err
    answers = []
    for name in ANALYSES:
        for fmt in formats:
            r = run_cli("--memory-dir", str(memory), "analytics", name, "--format", fmt)
            assert r.code == 0, r.err
            answers.append(r.out)
    if not formats:
        with SqliteStore.open(memory / "ledger.db", create=False) as store:
            answers.append(orjson.dumps({n: report.as_json() for n, report in analyse_all(store).items()}).decode())
    out = memory.parent / "answers.txt"
    out.write_text("\n".join(answers))
    assert (memory / MIRROR_FILE).exists()
    return scan(memory / MIRROR_FILE, needles) + scan(out, needles)


def test_secrets_in_odd_places_reach_no_analytics(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    assert _plant_and_scan(memory, _odd_places(), NEEDLES) == []


#: where a hypothesis example puts its secret: a function of (the text holding the secret) -> an event
PLACES = {
    "goal": lambda t: {"type": "run_started", "run_id": "r1", "goal": t, "start_url": "http://a.test/"},
    "query": lambda t: {"type": "run_started", "run_id": "r1", "goal": "g", "start_url": f"http://a.test/?q={t}&n=1"},
    "fragment": lambda t: {
        "type": "run_completed",
        "run_id": "r1",
        "success": True,
        "final_url": f"http://a.test/#{t}",
    },
    "dict key": lambda t: {
        "type": "step_recorded",
        "run_id": "r1",
        "step": 1,
        "ok": True,
        "action": {"command": "click", "args": {"ref": "e1", "deep": [[{t: 1}]]}},
    },
    "lesson": lambda t: {
        "type": "lesson_recorded",
        "lesson_id": "",
        "lesson": t,
        "category": "error_recovery",
        "failed_command": "click",
        "error_pattern": "x",
    },
    "fact": lambda t: {"type": "fact_observed", "domain": "a.test", "fact_type": "quirk", "key": "k", "value": t},
}
_filler = st.text(st.characters(whitelist_categories=["L", "N", "Zs"]), max_size=40)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from([s for s in S.SHAPES if " " not in s.text]),
    place=st.sampled_from(sorted(PLACES)),
    before=_filler,
    after=_filler,
    repeat=st.integers(1, 400),
)
def test_any_secret_anywhere_reaches_no_analytics(
    shape: S.Shape, place: str, before: str, after: str, repeat: int
) -> None:
    text = f"{before * repeat} {shape.text} {after}"[:99_000]
    with tempfile.TemporaryDirectory() as tmp:
        memory = Path(tmp) / "memory"
        lines = (
            [{"type": "run_started", "run_id": "r1", "goal": "g", "start_url": "http://a.test/"}]
            if place not in ("goal", "query")
            else []
        )
        assert _plant_and_scan(memory, [*lines, PLACES[place](text)], list(shape.needles), formats=()) == []
