"""Secrets never at rest: every shape in `tests/secret_shapes.py`, planted in goals, typed values,
page text, payload fields, dict keys, secret-named keys and envelope fields, is found in no byte of
ledger.db, its WAL, projections.db (and its compressed states), any export, the report or any audit.

The planting goes through `memtape append` (payloads, keys and envelopes as a caller writes them),
through the agent's memory facade (a login goal, a password typed into a password field, an API
key typed into an ordinary field, values typed into fields named Password, PIN, One-time code,
Card number and API token without `sensitive`, a page showing every shape), and through HTTP and
MCP (every shape in a run's goal and start URL, a step's target, URL, error and arguments, a
lesson's text, command and pattern, a fact's key and value, and typed values with and without
`sensitive`); `test_secrets_browser.py` does the same with the real agent in Chromium. Property tests check the detectors on their own: no
UUID, hex digest or run id is touched, card numbers are redacted exactly when the Luhn check passes,
and whatever the policy would type as a password is what the scrubber hides.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.client import Client

import memtape
from memtape.agent.policy import parse_goal
from memtape.ledger.events import EVENT_TYPES, Action
from memtape.ledger.ids import short_id, uuid7
from memtape.ledger.redact import DETECTORS, MARKER, Redactor, default_redactor, may_hold_secret, secret_named
from memtape.ledger.settings import Settings
from memtape.ledger.store import SqliteStore
from memtape.ledger.vendored_secrets import LEFT_OUT, PLUGINS, VENDORED
from memtape.mcp_server import build_server
from memtape.projections.recording.learning import goal_secrets
from memtape.projections.recording.memory import RecordingMemory
from memtape.server import create_app
from tests import secret_shapes as S
from tests.cli_runner import run_cli
from tests.secret_shapes import Shape
from tests.security_support import play, produce_outputs, scan, step

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
#: single-token shapes, usable as a dict key
TOKENS = [s.text for s in S.SHAPES if re.fullmatch(r"[A-Za-z0-9_.\-]+", s.text)]
SECRET_RUN = S.AWS_ID
SECRET_STREAM = S.GITHUB
SECRET_ID = S.OPENAI
SECRET_DOMAINS = [S.OPENAI.lower() + ".example.com", S.AWS_ID.lower() + ".example.com"]


def planted_lines() -> list[dict[str, object]]:
    """What a caller appends: every shape in a fact's value, a step's error and thought, a page title
    and a URL; single-token shapes as dict keys; values under secret-named keys; secret envelopes."""
    lines: list[dict[str, object]] = []
    for i, shape in enumerate(S.SHAPES):
        lines.append(
            {
                "type": "fact_observed",
                "domain": "shop.test",
                "fact_type": "pattern",
                "key": f"shape {i}",
                "value": f"seen on the page: {shape.text} (end)",
            }
        )
        lines.append(
            {
                "type": "step_recorded",
                "run_id": "run_planted",
                "step": i,
                "domain": "shop.test",
                "ok": False,
                "error": f"request failed with {shape.text}",
                "think": f"the page said {shape.text}",
                "env_after": {"url": "http://shop.test/", "title": shape.text[:200]},
                "action": {"command": "click", "args": {"ref": "e1", "note": shape.text}},
            }
        )
    lines.append(
        {
            "type": "step_recorded",
            "run_id": "run_planted",
            "step": 999,
            "ok": True,
            "action": {
                "command": "fill",
                "args": {**{t: "value under a secret key" for t in TOKENS}, **S.SECRET_KEYED, "ref": "e2"},
            },
        }
    )
    lines.append(
        {"type": "run_started", "run_id": SECRET_RUN, "goal": 'Open "Catalog"', "start_url": "http://shop.test/"}
    )
    lines.append({"type": "run_progress", "run_id": SECRET_RUN, "turn": 1, "current_url": "http://shop.test/"})
    lines.append(
        {
            "type": "step_recorded",
            "run_id": SECRET_RUN,
            "step": 1,
            "ok": True,
            "action": {"command": "click", "args": {"ref": "e5"}},
        }
    )
    lines.append(
        {
            "type": "fact_observed",
            "stream": SECRET_STREAM,
            "id": SECRET_ID,
            "domain": SECRET_DOMAINS[0],
            "fact_type": "quirk",
            "key": "envelope",
            "value": "secrets in the envelope",
        }
    )
    lines.append(
        {
            "type": "fact_observed",
            "domain": SECRET_DOMAINS[1],
            "fact_type": "quirk",
            "key": "domain",
            "value": "an AWS key id as a host name",
        }
    )
    return lines


def agent_run(store: SqliteStore, settings: Settings) -> None:
    """A login goal, a password typed into a password field, an API key typed into an ordinary field,
    and a page that shows every shape, through the memory facade the agent uses."""
    url = "http://portal.test/login"
    page = "\n".join(s.text for s in S.SHAPES)
    fields = [
        step(10 + i, "fill", url, label, "textbox", args={"ref": f"f{i}", "value": value})
        for i, (label, value) in enumerate(S.FIELD_SECRETS.items())
    ]  # sensitive left False
    steps = [
        step(1, "fill", url, "Username", "textbox", args={"ref": "e1", "value": "ada"}),
        step(2, "fill", url, "Password", "textbox", args={"ref": "e2", "value": S.LOGIN_PASSWORD}, sensitive=True),
        step(3, "fill", url, "API key", "textbox", args={"ref": "e3", "value": S.OPENAI}),
        step(4, "type", url, "Notes", "textbox", args={"ref": "e4", "text": S.GITHUB, "delay": 5}, sensitive=True),
        *fields,
        step(5, "click", url, "Log in", "button", url_after="http://portal.test/dashboard"),
    ]
    goal = f'Log in as "ada" using "{S.LOGIN_PASSWORD}", set "API key" to "{S.OPENAI}" and click "Save"'
    play(RecordingMemory(store, settings.projections_path), "run_agent_login", goal, url, steps, page_text=page)


def face_calls(shape: Shape, i: int) -> list[tuple[str, dict[str, Any]]]:
    """What an external agent sends through HTTP or MCP, with `shape` in every text field: (what, arguments)."""
    text = shape.text
    return [
        ("start_run", {"goal": f"Check the page that said {text}", "start_url": "http://shop.test/?q=" + quote(text)}),
        (
            "record_step",
            {
                "step": 1,
                "action": "click",
                "target": 'link "' + text.replace('"', '\\"') + '"',
                "url": "http://shop.test/" + quote(text),
                "ok": False,
                "error": f"failed: {text}",
                "args": {"note": text},
            },
        ),
        (
            "record_step",
            {
                "step": 2,
                "action": "fill",
                "target": 'textbox "Notes"',
                "ok": True,
                "args": {"ref": "e2", "value": text},
                "sensitive": True,
            },
        ),
        (
            "record_step",
            {
                "step": 3,
                "action": "type",
                "target": f'textbox "{list(S.FIELD_SECRETS)[i % len(S.FIELD_SECRETS)]}"',
                "ok": True,
                "args": {"ref": "e3", "text": list(S.FIELD_SECRETS.values())[i % len(S.FIELD_SECRETS)]},
            },
        ),
        (
            "record_lesson",
            {
                "text": f"When it says {text}, retry",
                "category": "error_recovery",
                "failed_command": f"click {text}",
                "error_pattern": f"failed: {text}",
            },
        ),
        ("observe_fact", {"kind": "quirk", "key": f"over a face {i} {text[:60]}", "value": f"the page shows {text}"}),
    ]


def plant_over_http(memory_dir: Path) -> None:
    with memtape.open(memory_dir) as mem, TestClient(create_app(mem), base_url="http://127.0.0.1") as http:
        for i, shape in enumerate(S.SHAPES[::2]):
            run_id = ""
            for what, args in face_calls(shape, i):
                if what == "start_run":
                    answer = http.post("/runs", json=args)
                    run_id = answer.json()["run_id"]
                else:
                    route = {"record_step": "steps", "record_lesson": "lessons", "observe_fact": "facts"}[what]
                    answer = http.post(f"/runs/{run_id}/{route}", json=args)
                assert answer.is_success, (shape.name, what, answer.text)
            assert http.post(f"/runs/{run_id}/finish", json={"success": False, "outcome": shape.text}).is_success


def plant_over_mcp(memory_dir: Path) -> None:
    async def calls() -> None:
        with memtape.open(memory_dir) as mem:
            async with Client(build_server(mem)) as client:
                for i, shape in enumerate(S.SHAPES[1::2]):
                    run_id = ""
                    for what, args in face_calls(shape, i):
                        result = await client.call_tool(what, {**args, "run_id": run_id} if run_id else args)
                        assert not result.is_error, (shape.name, what, result.content)
                        if what == "start_run":
                            run_id = orjson.loads(result.content[0].text)["run_id"]  # type: ignore[union-attr]
                    result = await client.call_tool(
                        "finish_run", {"run_id": run_id, "success": False, "outcome": shape.text}
                    )
                    assert not result.is_error, result.content

    anyio.run(calls)


@dataclass
class World:
    memory_dir: Path
    store: SqliteStore


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    memory_dir = tmp_path_factory.mktemp("secrets") / ".agent-memory"
    src = memory_dir.parent / "planted.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps(line) for line in planted_lines()))
    r = run_cli("--memory-dir", str(memory_dir), "append", str(src))
    assert r.code == 0, r.err
    settings = Settings(memory=str(memory_dir))
    store = settings.store()
    agent_run(store, settings)
    plant_over_http(memory_dir)
    plant_over_mcp(memory_dir)
    for args in (("rebuild",), ("state", "tier1")):
        r = run_cli("--memory-dir", str(memory_dir), *args)
        assert r.code == 0, r.err
    produce_outputs(memory_dir, memory_dir / "out")
    yield World(memory_dir, store)
    settings.close()


def test_at_least_thirty_shapes_are_planted() -> None:
    assert len(S.SHAPES) >= 30
    assert len({s.name for s in S.SHAPES}) == len(S.SHAPES)
    assert len(set(S.needles())) == len(S.needles())


def test_no_secret_in_any_byte(world: World) -> None:
    assert Path(f"{world.store.path}-wal").stat().st_size > 0  # the WAL holds rows: it is scanned too
    hits = scan(world.memory_dir, S.needles() + SECRET_DOMAINS)
    assert hits == []
    files = {p.name for p in world.memory_dir.rglob("*") if p.is_file()}
    assert {
        "ledger.db",
        "ledger.db-wal",
        "projections.db",
        "analytics.duckdb",
        "report.html",
        "memory.json",
        "steps.csv",
    } <= files  # the analytics mirror too (its values scanned as text)
    assert any(name.startswith("run_agent_login") for name in files)  # the audit of the agent's run


def test_redacted_not_dropped(world: World) -> None:
    events = list(world.store.read())
    facts = [e for e in events if e.type == "fact_observed" and e.data["key"].startswith("shape ")]
    assert len(facts) == len(S.SHAPES)
    assert all(MARKER in e.data["value"] and e.data["value"].startswith("seen on the page: ") for e in facts)
    keyed = next(e for e in events if e.type == "step_recorded" and e.step == 999)
    args = keyed.data["action"]["args"]
    assert args["ref"] == "e2" and all(args[k] == MARKER for k in S.SECRET_KEYED)
    assert not set(TOKENS) & set(args)  # secret dict keys are redacted, their values kept
    assert sum(1 for k in args if k.startswith(MARKER)) == len(TOKENS)
    login = [e for e in events if e.type == "step_recorded" and e.run_id == "run_agent_login"]
    sensitive = [e.data["action"] for e in login if e.data["action"]["sensitive"]]
    assert len(sensitive) == 2 + len(S.FIELD_SECRETS) and all(set(a["args"].values()) == {MARKER} for a in sensitive)
    assert [e.data["action"]["args"]["value"] for e in login if e.data["target_text"] == "Username"] == ["ada"]
    started = next(e for e in events if e.type == "run_started" and e.run_id == "run_agent_login")
    assert started.data["goal"] == f'Log in as "ada" using "{MARKER}", set "API key" to "{MARKER}" and click "Save"'


def test_envelope_fields_are_redacted_and_still_group(world: World) -> None:
    events = list(world.store.read())
    runs = {e.run_id for e in events if e.run_id}
    assert "run_planted" in runs and "run_agent_login" in runs
    secret_runs = [
        e for e in events if e.type in ("run_started", "run_progress") and (e.run_id or "").startswith("redacted-")
    ]
    assert len(secret_runs) == 2 and len({e.run_id for e in secret_runs}) == 1  # the run's two events stay one run
    redacted_run = secret_runs[0].run_id
    assert redacted_run is not None and redacted_run.startswith("redacted-")
    envelope = next(e for e in events if e.type == "fact_observed" and e.data["key"] == "envelope")
    assert envelope.stream.startswith("redacted-") and envelope.id.startswith("redacted-")
    assert envelope.domain is not None and envelope.domain.startswith("redacted-")
    host = next(e for e in events if e.type == "fact_observed" and e.data["key"] == "domain")
    assert host.domain is not None and host.domain.startswith("redacted-")


def test_ids_hashes_and_chain_are_untouched(world: World) -> None:
    events = list(world.store.read())
    generated = [e for e in events if e.type == "step_recorded"]
    assert generated and all(UUID.match(e.id) for e in generated)
    assert all(re.fullmatch(r"[0-9a-f]{64}", e.hash) and re.fullmatch(r"[0-9a-f]{64}", e.prev_hash) for e in events)
    r = run_cli("--memory-dir", str(world.memory_dir), "verify")
    assert r.code == 0, r.err


# ---- one parser for logins ---------------------------------------------------------------------


def test_the_agent_logs_in_with_what_the_scrubber_hides() -> None:
    goal = 'Log in as "demo" using "correct-horse-battery"'
    (login,) = parse_goal(goal)
    assert (login.kind, login.a, login.b) == ("login", "demo", "correct-horse-battery")
    assert goal_secrets(goal) == ["correct-horse-battery"]
    assert default_redactor().text(goal) == f'Log in as "demo" using "{MARKER}"'
    # a login page's URL is not a login instruction, for the policy and the scrubber alike
    line = 'fill "demo" into textbox "Username" (on http://portal.test/login)'
    assert [s.kind for s in parse_goal(line)] != ["login"] and default_redactor().text(line) == line


_QUOTABLE = st.text(
    st.characters(blacklist_characters="\n\r\x00\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=200
).filter(lambda s: s.strip() != "")


def written(text: str) -> str:
    """`text` inside a goal's quotes: a quote and a backslash escaped (as a prompt fences memory text)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def hidden(secret: str, stored: str) -> bool:
    """Whether no part of `stored` left between markers holds `secret` (invisible characters aside)."""
    visible = re.sub("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]", "", secret)
    return visible.strip() == "" or all(visible not in part for part in stored.split(MARKER))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["Log in", "log in", "Login", "Sign in", "sign in"]),
    st.sampled_from(["as", "with", "for", "to"]),
    st.sampled_from(["using", "with password", "and password", "/"]),
    _QUOTABLE,
    _QUOTABLE,
    st.sampled_from(["", 'Open "Home", then ', 'Accept "Cookies" and ', 'Open "C:\\\\", then ']),
    st.sampled_from(
        ["", ', open "Profile"', ' and then click "Save"', '.\nWait for "Done"', ', click "\\"Sign in\\""']
    ),
)
def test_every_password_the_policy_types_is_scrubbed(
    verb: str, prep: str, joint: str, user: str, password: str, before: str, after: str
) -> None:
    """Quotes and backslashes in the user name and password, escaped as a quoted string writes them:
    the policy types what they mean, and the scrubber hides it (as typed and as written)."""
    goal = f'{before}{verb} {prep} "{written(user)}" {joint} "{written(password)}"{after}'
    logins = [(s.a, s.b) for s in parse_goal(goal) if s.kind == "login"]
    # " and " ends a clause: `password "p"` is then named by keyword, which the policy does not type
    assert logins == ([] if joint == "and password" else [(user, password)])
    assert password in goal_secrets(goal)
    stored = default_redactor().text(goal)
    assert hidden(password, stored) and hidden(written(password), stored), (goal, stored)


_GOAL_PARTS = st.sampled_from(
    ['"', "\\", '\\"', "\\\\", "Log in", "sign in", " as ", " using ", " password ", ", ", " and ", " then ", "\n"]
    + ["demo", "pw", ":", "=", " ", ".", "\\u0022", "x" * 199, "\u200b"]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_GOAL_PARTS, st.text(max_size=6)), max_size=24).map("".join))
def test_the_policy_and_the_scrubber_read_any_goal_alike(goal: str) -> None:
    """Any text, quotes escaped or not, backslashes anywhere, strings at the length limit: every
    password the policy would type is one the scrubber finds, and it is hidden in the goal as given,
    JSON-encoded in a request body, and encoded again inside that."""
    typed = [s.b for s in parse_goal(goal) if s.kind == "login"]
    assert set(typed) <= set(goal_secrets(goal))
    r = default_redactor()
    body = orjson.dumps({"messages": [{"content": goal}]}).decode()
    for stored in (r.text(goal), r.text(body), r.text(orjson.dumps(body).decode())):
        for password in typed:
            encoded = orjson.dumps(password).decode()[1:-1]
            assert hidden(password, stored) and hidden(encoded, stored), (goal, stored)
            assert hidden(orjson.dumps(encoded).decode()[1:-1], stored)


def test_a_password_in_escaped_quotes_is_hidden_where_the_policy_would_type_it() -> None:
    r = default_redactor()
    goal = 'Log in as "demo" using "hunter2"'
    body = json.dumps({"goal": goal})
    # the goal in a recorded request body, in one nested inside it, in a fragment of one, and with
    # its quotes written as \u0022 (.NET's encoder); the policy reading the goal types hunter2
    for stored in (body, json.dumps(body), body[9:-2], json.dumps(goal).replace('\\"', "\\u0022")):
        assert "hunter2" not in r.text(stored), stored
    assert r.text(body) == '{"goal": "Log in as \\"demo\\" using \\"[REDACTED]\\""}'
    # a goal holding backslashes: the password is typed as meant and hidden as typed and as written
    goal = 'Log in as "demo" using "C:\\\\temp\\\\ & \\"x\\"" then open "Home"'
    assert [(s.kind, s.b) for s in parse_goal(goal)] == [("login", 'C:\\temp\\ & "x"'), ("click", "")]
    assert r.text(goal) == f'Log in as "demo" using "{MARKER}" then open "Home"'
    assert goal_secrets(goal) == ['C:\\temp\\ & "x"', 'C:\\\\temp\\\\ & \\"x\\"']
    # a quote escaped outside any string opens none: the policy logs in with nothing, nothing is hidden
    fragment = 'Log in as \\"demo\\" using \\"hunter2'
    assert parse_goal(fragment) == [] and goal_secrets(fragment) == []


# ---- detectors --------------------------------------------------------------------------------


def test_every_shape_is_caught_alone_and_in_a_sentence() -> None:
    r = default_redactor()
    for shape in S.OWN_SHAPES:
        for text in (shape.text, f"Note: {shape.text}, then continue", f"[{shape.text}]"):
            out = r.text(text).lower()
            assert not [n for n in shape.needles if n.lower() in out], (shape.name, text, out)


def test_secret_names_are_patterns_and_schema_fields_are_not_secrets() -> None:
    for name in [
        *S.SECRET_KEYED,
        "PASSWORD",
        "userPassword",
        "db-passwd",
        "X-Auth-Token",
        "csrftoken",
        "clientSecret",
        "privateKey",
        "JSESSIONID",
        "PHPSESSID",
        "set-cookie",
        "proxy_authorization",
        "stripe_secret_key",
    ]:
        assert secret_named(name), name
    ordinary = {
        "tokens",
        "tokens_in",
        "total_tokens",
        "session_id",
        "session_history",
        "key",
        "author",
        "keyboard",
        "passed",
        "selector",
        "value",
        "text",
    }
    assert not [n for n in ordinary if secret_named(n)]
    fields: set[str] = set()
    for cls in EVENT_TYPES.values():
        fields |= set(cls.model_fields)
    assert not [f for f in fields if secret_named(f)]  # a payload keeps its shape: no schema field is masked


def test_a_sensitive_action_masks_every_argument() -> None:
    action = Action(
        command="type", args={"ref": "e4", "text": "x", "delay": 50, "keys": "y", "secret": "z"}, sensitive=True
    )
    assert action.args == {"ref": MARKER, "text": MARKER, "delay": MARKER, "keys": MARKER, "secret": MARKER}
    assert Action(command="type", args={"text": "x"}).args == {"text": "x"}


def _luhn_ok(digits: str) -> bool:
    return S.luhn_complete(digits[:-1]) == digits


@settings(max_examples=400, deadline=None)
@given(st.text("0123456789", min_size=13, max_size=19))
def test_cards_are_redacted_exactly_when_luhn_passes(digits: str) -> None:
    out = default_redactor().text(f"card {digits} on file")
    assert (out == f"card {MARKER} on file") == _luhn_ok(digits)
    assert (out == f"card {digits} on file") == (not _luhn_ok(digits))


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=64), st.sampled_from(["sha256", "sha1", "md5", "blake2b"]))
def test_no_false_positive_on_digests_uuids_and_run_ids(data: bytes, algo: str) -> None:
    r = default_redactor()
    digest = hashlib.new(algo, data).hexdigest()
    samples = [
        digest,
        str(uuid.UUID(bytes=hashlib.md5(data).digest())),
        uuid7(),
        short_id("run"),
        f"seq 42 hash {digest}",
        f"http://shop.test/item/{digest[:12]}?page=2&sort=price",
    ]
    assert [s for s in samples if r.text(s) != s] == []
    assert r.ident(uuid7()) is not None and UUID.match(str(r.ident(uuid7())))


_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        [
            ("sk-", 20, 48),
            ("sk-proj-", 20, 60),
            ("sk-ant-api03-", 30, 60),
            ("sk_live_", 16, 40),
            ("rk_live_", 16, 40),
            ("AIza", 35, 35),
            ("ghp_", 36, 36),
            ("gho_", 36, 36),
            ("github_pat_", 40, 60),
            ("xoxb-", 20, 40),
            ("glpat-", 20, 20),
            ("npm_", 36, 36),
            ("hf_", 34, 34),
            ("whsec_", 24, 32),
        ]
    ),
    st.data(),
    st.integers(0, 10),
    st.booleans(),
)
def test_generated_tokens_are_caught_even_split_by_a_zero_width_space(
    shape: tuple[str, int, int], data: st.DataObject, cut: int, split: bool
) -> None:
    prefix, lo, hi = shape
    body = data.draw(st.text(_B64, min_size=lo, max_size=hi))
    token = prefix + body
    planted = token[:cut] + S.ZW + token[cut:] if split else token
    out = default_redactor().text(f"use {planted} now")
    assert token not in out and planted not in out and out == f"use {MARKER} now"


@settings(max_examples=200, deadline=None)
@given(st.from_regex(r"(AKIA|ASIA)[A-Z0-9]{16}", fullmatch=True), st.text(_B64 + "/+", min_size=40, max_size=40))
def test_aws_key_ids_and_random_secrets(key_id: str, secret: str) -> None:
    r = default_redactor()
    assert r.text(f"id {key_id} ok") == f"id {MARKER} ok"
    assert r.text(f"aws_secret_access_key={secret}") == f"aws_secret_access_key={MARKER}"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=20),
            st.sampled_from([s.text for s in S.SHAPES]),
            st.sampled_from(["\n", "\\", '"', " ", "-", S.ZW, "=", '\\"', "\\u0020", "\\u0022", "\\\\u0069"]),
            st.sampled_from(
                ['Log in as \\"a\\" using \\"pw1\\"', "Log\\u0020in as \\u0022a\\u0022 using \\u0022pw2\\u0022"]
            ),
        ),
        max_size=6,
    ).map("".join),
    st.sampled_from([*S.SECRET_KEYED, "value", "note", "Token", "tokens", "myTokenS", "session"]),
)
def test_the_fast_screen_never_misses_what_the_walk_redacts(text: str, key: str) -> None:
    r = default_redactor()
    data = {"outer": {key: text, "list": [text], text: 1}, "plain": text}
    if r.value(data) != data:
        assert may_hold_secret(orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode())


# ---- MEMTAPE_SECRET_PATTERNS -------------------------------------------------------------------


def test_extra_patterns_are_used() -> None:
    r = Redactor(["ACME-[0-9]{6}"])
    assert r.text("order ACME-123456 shipped") == f"order {MARKER} shipped"


@pytest.mark.parametrize("patterns", ["(unclosed", "ok-[0-9]+\n[z-a]", "x*"])
def test_a_bad_secret_pattern_is_one_line_and_nothing_is_written(tmp_path: Path, patterns: str) -> None:
    memory_dir = tmp_path / "mem"
    env = {**os.environ, "MEMTAPE_SECRET_PATTERNS": patterns}
    line = b'{"type": "fact_observed", "fact_type": "quirk", "key": "k", "value": "v"}\n'
    proc = subprocess.run(
        [sys.executable, "-m", "memtape", "--memory-dir", str(memory_dir), "append", "-"],
        input=line,
        capture_output=True,
        env=env,
        timeout=120,
    )
    err = proc.stderr.decode()
    assert proc.returncode != 0
    assert err.count("\n") == 1 and err.startswith("error: ") and "MEMTAPE_SECRET_PATTERNS line" in err, err
    assert "Traceback" not in err
    assert not (memory_dir / "ledger.db").exists()


def test_the_docs_count_what_is_covered() -> None:
    trust = (Path(__file__).resolve().parent.parent / "docs" / "trust.md").read_text()
    assert f"{len(DETECTORS)} detectors" in trust
    assert f"plants {len(S.SHAPES)} secret shapes" in trust and f"{len(S.SECRET_KEYED)} secret-named" in trust


# ---- detect-secrets ----------------------------------------------------------------------------


def test_the_vendored_patterns_are_detect_secrets_own() -> None:
    """ledger/vendored_secrets.py copies detect-secrets' plugin patterns: the installed package's
    plugins have exactly these (an upstream change fails here, naming the plugin)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    plugins = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
    assert set(PLUGINS) | set(LEFT_OUT) == set(plugins)
    for name in PLUGINS:
        upstream = [(p.pattern, p.flags & ~re.UNICODE) for p in plugins[name]().denylist]
        ours = [(v.pattern, re.compile(v.pattern, v.flags).flags & ~re.UNICODE) for v in VENDORED if v.plugin == name]
        assert ours == upstream, name


def test_whatever_detect_secrets_finds_in_the_corpus_the_door_hides() -> None:
    """detect-secrets' own scan (its default plugins, entropy ones included) over every shape: each
    secret it reports is gone from what the door keeps, except entropy hits on the text around a
    secret (words of the sentence), which the door keeps on purpose."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    r = default_redactor()
    missed = []
    with default_settings():
        for shape in S.SHAPES:
            kept = r.text(shape.text).replace(MARKER, "\n")
            for line in shape.text.splitlines():
                for found in scan_line(line):
                    value = found.secret_value or ""
                    if "High Entropy" in found.type and not any(value in n or n in value for n in shape.needles):
                        continue
                    if len(value) >= 4 and value in kept:
                        missed.append((shape.name, found.type, value))
    assert missed == []


@pytest.mark.parametrize(
    "label,selector",
    [
        ("Password", None),
        ("PIN code", None),
        ("One-time passcode", None),
        ("Security code", None),
        ("Card number", None),
        ("Search", "#password"),
        ("", "input[name=otp]"),
        ("API token", None),
        ("Client secret", None),
    ],
)
def test_a_value_typed_into_a_secret_field_is_masked_without_sensitive(label: str, selector: str | None) -> None:
    from memtape.ledger.events import ElementRef, StepRecorded

    typed = StepRecorded(
        action=Action(command="fill", args={"ref": "e7", "value": "Ivory-Crest-9051"}),
        target=ElementRef(role="textbox", name=label, selector=selector),
        ok=True,
    )
    assert typed.action.sensitive and "Ivory-Crest-9051" not in str(typed.model_dump())
    plain = StepRecorded(
        action=Action(command="fill", args={"ref": "e7", "value": "trail shoes"}),
        target=ElementRef(role="textbox", name="Search"),
        ok=True,
    )
    assert not plain.action.sensitive and plain.action.args["value"] == "trail shoes"
    clicked = StepRecorded(
        action=Action(command="click", args={"ref": "e8"}),
        target=ElementRef(role="button", name="Show password"),
        ok=True,
    )
    assert clicked.action.args == {"ref": "e8"}  # a click types nothing


def test_percent_encoding_hides_no_secret() -> None:
    r = default_redactor()
    out = r.text("https://a.example/cb?next=%2Fhome%3Fpassword%3DMaple-Crow-1176&x=1")
    assert "Maple-Crow-1176" not in out and MARKER in out
    plain = "https://a.example/search?q=trail%20shoes&page=2"
    assert r.text(plain) == plain
