"""Nothing secret at rest: typed passwords and secret-looking strings never reach the ledger's bytes."""

from __future__ import annotations

from pathlib import Path

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from memtape.ledger.envelope import NewEvent
from memtape.ledger.events import Action, ContextBuilt, ContextItem, StepRecorded
from memtape.ledger.redact import MARKER
from memtape.ledger.store import SqliteStore
from memtape.projections.folds.knowledge import Fact, fact_line
from tests.cli_runner import run_cli

PASSWORD = "hunter2-Corr3ct-Horse"
API_KEY = "sk-live0123456789abcdefXYZ"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
BEARER = "Bearer abcDEF123.ghiJKL456-mno"
CARD = "4111 1111 1111 1111"
CARD_DIGITS = "4111111111111111"
SECRETS = [PASSWORD, API_KEY, AWS_KEY, BEARER, "abcDEF123.ghiJKL456-mno", CARD, CARD_DIGITS]


def secret_steps() -> list[NewEvent]:
    typed = StepRecorded(
        action=Action(command="type", args={"selector": "#password", "value": PASSWORD}, sensitive=True),
        ok=True,
        target_text="Password",
    )
    keyed = StepRecorded(action=Action(command="fill", args={"password": PASSWORD, "selector": "#pw"}), ok=True)
    leaky = StepRecorded(
        action=Action(command="click", args={"selector": "#pay"}),
        ok=False,
        error=f"401 for key {API_KEY} and {AWS_KEY}; header Authorization: {BEARER}",
        think=f"pay with card {CARD} then {CARD_DIGITS}",
    )
    return [NewEvent(payload=p, run_id="r1", step=i) for i, p in enumerate((typed, keyed, leaky))]


def scan(directory: Path) -> list[str]:
    """Secrets found in any byte of any file in `directory` (ledger.db, -wal, -shm)."""
    found = []
    for path in directory.iterdir():
        data = path.read_bytes()
        found += [f"{path.name}: {s}" for s in SECRETS if s.encode() in data]
    return found


def test_secrets_never_reach_the_files(memory_path: Path) -> None:
    store = SqliteStore.open(memory_path / "ledger.db")
    recorded = store.append(secret_steps())
    assert Path(f"{store.path}-wal").stat().st_size > 0  # the rows are in the WAL now
    assert scan(memory_path) == []
    store.close()  # checkpointed into ledger.db
    assert scan(memory_path) == []
    assert recorded[0].data["action"]["args"]["value"] == MARKER
    assert recorded[1].data["action"]["args"]["password"] == MARKER
    assert recorded[2].data["error"].count(MARKER) == 3
    assert recorded[2].data["think"] == f"pay with card {MARKER} then {MARKER}"
    assert "selector" in recorded[0].data["action"]["args"]


def test_non_card_numbers_are_kept(fresh_ledger: SqliteStore) -> None:
    (ev,) = fresh_ledger.append(
        [
            NewEvent(
                payload=StepRecorded(action=Action(command="type", args={"value": "1234 5678 9012 3456"}), ok=True),
                run_id="r1",
            )
        ]
    )
    assert ev.data["action"]["args"]["value"] == "1234 5678 9012 3456"  # fails the Luhn check: not a card


def test_secrets_through_cli_append(memory_path: Path, tmp_path: Path) -> None:
    lines = [
        {
            "type": "step_recorded",
            "run_id": "r1",
            "ok": True,
            "action": {
                "command": "type",
                "args": {"selector": "input[type=password]", "value": PASSWORD},
                "sensitive": True,
            },
        },
        {"type": "fact_observed", "fact_type": "quirk", "key": "auth", "value": f"send {BEARER} with {API_KEY}"},
        {"type": "run_completed", "run_id": "r1", "success": True, "summary": f"paid with {CARD}"},
    ]
    src = tmp_path / "secrets.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps(line) for line in lines))
    r = run_cli("--memory-dir", str(memory_path), "append", "--raw", str(src))
    assert r.code == 0, r.err
    assert scan(memory_path) == []


SNIPPETS = [
    API_KEY,
    AWS_KEY,
    BEARER,
    "bearer\tabcdefghij",
    CARD,
    CARD_DIGITS,
    "4111-1111-1111-1111",
    "ghp_" + "a" * 24,
    "xoxb-1234567890ab",
    "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeK",
    "\nsk-" + "b" * 20,
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.text(max_size=20), st.sampled_from(SNIPPETS), st.sampled_from(["\n", "\\", '"', " ", "-"])),
        max_size=6,
    ).map("".join),
    st.sampled_from(["value", "password", "Token", "note", "api-key", "card_number"]),
)
def test_fast_screen_never_misses_what_the_full_walk_redacts(text: str, key: str) -> None:
    from memtape.ledger.redact import default_redactor

    r = default_redactor()
    data = {"outer": {key: text, "list": [text]}, "plain": text}
    if r.value(data) != data:
        assert r.may_contain_secrets(orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode())


def test_one_secret_in_a_large_batch(fresh_ledger: SqliteStore) -> None:
    from tests.ledger_samples import sample_event

    batch = [sample_event("fact_observed", text=f"benign {i}") for i in range(50)]
    batch[37] = sample_event("fact_observed", text=f"token {API_KEY}")
    recorded = fresh_ledger.append(batch)
    assert [i for i, e in enumerate(recorded) if MARKER in e.payload_json] == [37]
    assert all(API_KEY not in e.payload_json for e in fresh_ledger.read())
    assert recorded[36].data["value"] == "benign 36"


def test_hex_digests_and_ids_are_not_card_numbers() -> None:
    import hashlib

    from memtape.ledger.redact import default_redactor

    r = default_redactor()
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(5000)]
    assert [d for d in digests if r.text(d) != d] == []
    assert r.text("lsn_4111111111111111") == "lsn_4111111111111111"
    assert r.text(f"card:{CARD_DIGITS}.") == f"card:{MARKER}."


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(st.text(max_size=20), st.sampled_from(SNIPPETS), st.sampled_from(["key", "pass", "\u200b", " "])),
        max_size=4,
    ).map("".join)
)
def test_a_remembered_clean_verdict_changes_no_answer(text: str) -> None:
    """A redactor remembers the short strings it found clean (a fact's "key" field passes the screen
    but holds nothing; keys and labels the screen clears repeat in every event): asked again it
    answers as a fresh redactor does, and keeps no secret."""
    from memtape.ledger.redact import CLEAN_CACHE_TEXT, Redactor

    r = Redactor()
    first = r.text(text)
    assert r.text(text) == first == Redactor().text(text)
    assert (text in r._clean) == (first == text and len(text) <= CLEAN_CACHE_TEXT)
    assert r.text("key") == "key" and "key" in r._clean
    assert r.text(API_KEY) == MARKER and API_KEY not in r._clean


def test_a_prompt_quoting_element_names_in_a_fact_is_recorded_as_the_model_saw_it(
    fresh_ledger: SqliteStore,
) -> None:
    """APP KNOWLEDGE renders a fact as JSON-quoted text: the escaped quotes around "Sign in" are inside
    one string, so the grammar finds no login there and the ledger keeps the prompt byte for byte."""
    fact = Fact(
        "f1", "portal.test", "pattern", "auth flow", 'fill "Username" → fill "Password" → click "Sign in"',
        0.6, 1, "t", None, "t", "t", False, (),
    )  # fmt: skip
    line = fact_line(fact)
    assert line == (
        '- pattern: "auth flow": "fill \\"Username\\" → fill \\"Password\\" → click \\"Sign in\\"" (confidence 0.60)'
    )
    item = ContextItem(source="app_knowledge", priority=50, tokens=30, text=f"APP KNOWLEDGE:\n{line}")
    payload = ContextBuilt(prompt="step", budget=400, total_tokens=30, items=[item])
    (recorded,) = fresh_ledger.append([NewEvent(payload=payload, run_id="r1", step=1)])
    assert recorded.data["items"][0]["text"] == f"APP KNOWLEDGE:\n{line}"
    assert list(fresh_ledger.read())[-1].data["items"][0]["text"] == f"APP KNOWLEDGE:\n{line}"
