"""What a person sees on the command line: one `--format table|json|csv|parquet` (and `--out`) on
every command that lists things, `--json` as its synonym, tables sized to the terminal (120 columns
when piped) that wrap their widest text column and never cut a hash, `no memory at DIR` for a
read on a typo, `--version`, `--list-params`, section names in `--help`, quiet SIGPIPE, and both
forms of a SQLite store URL."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from unittest import mock

import orjson
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtape.analytics.queries import ANALYSES, sections
from memtape.analytics.tabular import Table
from memtape.commands import READS_ONLY
from memtape.ledger.clock import SteppingClock
from memtape.ledger.envelope import event
from memtape.ledger.events import LessonRecorded
from memtape.ledger.store import SqliteStore
from memtape.output import layout
from memtape.projections.cache.materialize import rebuild
from memtape.projections.folds.state import PROJECTIONS, digests
from memtape.projections.parameters import Thresholds
from tests.analytics_builders import hand_ledger
from tests.cli_runner import run_cli

LONG = (
    "When the autocomplete list covers the submit button press Escape first so the list closes and then click "
    "the button again instead of waiting for the list to go away by itself which it never does on this site"
)


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("face") / "memory"
    d.mkdir(mode=0o700)
    with SqliteStore.open(d / "ledger.db", clock=SteppingClock()) as store:
        hand_ledger(store)
        store.append(
            [
                event(
                    LessonRecorded(
                        lesson_id="long1", lesson=LONG, category="site_specific", scope_domain="search.test"
                    ),
                    run_id="r2",
                    domain="search.test",
                )
            ]
        )
    return d


def cli(memory: Path, *args: str, columns: int | None = None) -> str:
    env = {"COLUMNS": str(columns)} if columns else {}
    with mock.patch.dict(os.environ, env):
        if not columns:
            os.environ.pop("COLUMNS", None)
        r = run_cli("--memory-dir", str(memory), *args)
    assert r.code == 0, (args, r.err)
    return r.out


LISTINGS = [
    ["state", "lessons"],
    ["state", "facts"],
    ["runs"],
    ["diff", "--from", "1", "--to", "22"],
    ["events"],
    ["stats"],
    ["analytics", "runs"],
    ["audit", "r2"],
    ["explain", "L1"],
]


@pytest.mark.parametrize("args", LISTINGS, ids=lambda a: " ".join(a[:2]))
def test_every_listing_takes_every_format_and_out(memory: Path, args: list[str], tmp_path: Path) -> None:
    table = cli(memory, *args, "--format", "table")
    assert table.strip() and max(len(line) for line in table.splitlines()) <= 120  # piped: 120 columns
    data = (
        orjson.loads(cli(memory, *args, "--format", "json"))
        if args[0] != "events"
        else [orjson.loads(line) for line in cli(memory, *args, "--format", "json").splitlines()]
    )
    rows = list(csv.DictReader(io.StringIO(cli(memory, *args, "--format", "csv"))))
    if args[0] == "stats":  # json: one object of counts; csv: its first table, the summary
        assert len(rows) == 1 and rows[0]["events"] == str(data["count"]) == "22"
    else:
        main = data if isinstance(data, list) else next(iter(data.values()))
        assert len(rows) == len(main) > 0
    out = tmp_path / "answer.parquet"
    cli(memory, *args, "--format", "parquet", "--out", str(out))
    assert pq.read_table(out).num_rows == len(rows)
    for fmt in ("table", "json", "csv"):
        target = tmp_path / f"answer.{fmt}"
        assert cli(memory, *args, "--format", fmt, "--out", str(target)) == ""
        assert target.read_text() == cli(memory, *args, "--format", fmt)
    if args[0] not in ("audit", "explain"):  # there --json is the nested document they always printed
        assert cli(memory, *args, "--json") == cli(memory, *args, "--format", "json")


def test_json_and_format_together_are_refused(memory: Path) -> None:
    r = run_cli("--memory-dir", str(memory), "runs", "--json", "--format", "csv")
    assert r.code == 2 and r.err.startswith("error: --json is --format json") and r.err.count("\n") == 1


def test_the_widest_text_column_wraps_and_nothing_is_lost(memory: Path) -> None:
    for columns in (80, 120, 160):
        text = cli(memory, "state", "lessons", columns=columns)
        if columns >= 120:
            assert max(len(line) for line in text.splitlines()) <= columns
        rows = [line.split("│") for line in text.splitlines() if line.startswith("│")]
        lesson = " ".join(" ".join(row[-2].strip() for row in rows).split())
        assert " ".join(LONG.split()) in lesson  # the lesson column wrapped, every word kept, nothing cut
        ids = [row[1].strip() for row in rows]
        assert {"long1", "seed1", "L1"} <= set(ids)  # ids are never cut or wrapped
        assert "…" not in text


def test_hashes_are_never_cut(memory: Path, tmp_path: Path) -> None:
    with SqliteStore.open(memory / "ledger.db") as store:
        want = digests(rebuild(store, tmp_path / "projections.db"), PROJECTIONS)
    for columns in (50, 120):
        text = cli(memory, "rebuild", columns=columns)
        assert all(d in text for d in want.values()) and "…" not in text, columns


def test_cut_text_ends_with_an_ellipsis(memory: Path) -> None:
    lines = cli(memory, "events", "--type", "lesson_recorded", columns=100).splitlines()
    cut = next(line for line in lines if line.split()[0] == "22")
    assert 90 < len(cut) <= 100 and cut.endswith("…") and cut[:-1].split()[-1] in LONG.split()[:3]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(alphabet="abc de", max_size=90), st.integers(), st.text(alphabet="xy z", max_size=40)),
        min_size=1,
        max_size=8,
    ),
    st.integers(min_value=20, max_value=200),
)
def test_layout_fits_when_it_can_and_keeps_numbers_and_hashes(rows: list, width: int) -> None:
    digest = "ab" * 32
    table = Table(["text", "count", "note", "digest"], [(*r, digest) for r in rows])
    widths, wrapped = layout(table, width)
    assert widths[3] == 64 and widths[1] >= max(len(str(n)) for _, n, _ in rows)  # never cut
    assert wrapped <= {0, 2}
    floor = widths[1] + 64 + 3 * 4 + 1 + 2 * 16
    if floor <= width:
        assert sum(widths) + 3 * 4 + 1 <= width
    if sum(max(len(a) for a, _, _ in rows) for _ in [0]) + 10 + 64 + 40 + 13 <= width:
        assert not wrapped  # a table that fits is left alone


def test_analytics_table_to_a_file(memory: Path, tmp_path: Path) -> None:
    out = tmp_path / "promotions.txt"
    r = run_cli("--memory-dir", str(memory), "analytics", "promotions", "--format", "table", "--out", str(out))
    assert r.code == 0 and r.out == "" and "funnel" in out.read_text()


# ---- no accidental memory ---------------------------------------------------------------

READS = {
    "events": [],
    "verify": [],
    "stats": [],
    "rebuild": [],
    "state": ["lessons"],
    "runs": [],
    "diff": ["--from", "1", "--to", "2"],
    "analytics": ["runs"],
    "audit": ["r1"],
    "explain": ["L1"],
    "experiment": ["--set", "promotion_min_uses=3"],
    "fork": ["--until", "1", "--out", "forked"],
    "report": ["--out", "rep"],
    "watch": ["--timeout", "1"],
    "export": ["--format", "json", "--out", "x.json"],
}


def test_reads_on_a_typo_say_no_memory_and_create_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(READS) == READS_ONLY
    monkeypatch.chdir(tmp_path)
    for command, args in READS.items():
        typo = tmp_path / "agent-memroy"
        r = run_cli("--memory-dir", str(typo), command, *args)
        assert (r.code, r.err) == (1, f"error: no memory at {typo}\n"), command
        assert list(tmp_path.iterdir()) == [], command
    r = run_cli("--store", f"sqlite:///{tmp_path}/nothing/ledger.db", "runs")
    assert r.code == 1 and r.err == f"error: no memory at sqlite:///{tmp_path}/nothing/ledger.db\n"
    assert list(tmp_path.iterdir()) == []


def test_writes_create_memory(tmp_path: Path) -> None:
    line = b'{"type":"lesson_seeded","lesson_id":"l1","lesson":"Wait for the page","category":"best_practice"}\n'
    r = run_cli("--memory-dir", str(tmp_path / "new"), "append", "--raw", "-", stdin=line)
    assert r.code == 0 and (tmp_path / "new" / "ledger.db").exists()
    assert orjson.loads(run_cli("--memory-dir", str(tmp_path / "new"), "stats", "--json").out)["count"] == 1


# ---- version, parameters, sections, pipes, store URLs ---------------------------------------


def test_version() -> None:
    from importlib.metadata import version

    r = run_cli("--version")
    assert r.code == 0 and r.out == f"memtape {version('memtape')}\n"
    assert re.fullmatch(r"memtape \d+\.\d+\.\d+\n", r.out)


def test_list_params_names_defaults_and_ranges() -> None:
    r = run_cli("experiment", "--list-params", "--json")
    assert r.code == 0
    rows = {p["name"]: p for p in orjson.loads(r.out)}
    assert list(rows) == list(Thresholds.model_fields)
    assert rows["promotion_min_uses"] == {
        "name": "promotion_min_uses",
        "type": "int",
        "default": 5,
        "range": "1 to 1000000000",
        "meaning": Thresholds.model_fields["promotion_min_uses"].description,
    }
    assert rows["fact_decay"]["range"] == "above 0 to 1" and rows["trace_scoring"]["range"] == "true or false"
    assert rows["fact_confirm_rate"]["range"] == "0 to 1"
    assert all(p["meaning"] for p in rows.values())
    table = run_cli("experiment", "--list-params").out
    assert "promotion_min_uses" in table and "0 to 1" in table
    bad = run_cli("experiment", "--set", "fact_decay=2")
    assert bad.code == 1 and "less than or equal to 1" in bad.err


def test_help_lists_the_section_names() -> None:
    group = " ".join(run_cli("analytics", "--help").out.split())
    assert all(f"{name}: {', '.join(sections(file))}" in group for name, (file, _) in ANALYSES.items())
    for name, (file, _) in ANALYSES.items():
        text = " ".join(run_cli("analytics", name, "--help").out.split())
        assert all(section in text for section in sections(file)), name
    for command, names in (
        ("audit", "steps, prompt_items, memory"),
        ("explain", "life, now, recalled_in_runs"),
        ("experiment", "decisions, timeline, final, sizes"),
        ("stats", "summary, by_type, by_domain, by_run"),
    ):
        assert names in " ".join(run_cli(command, "--help").out.split()), command


def test_a_closed_pipe_exits_quietly(memory: Path) -> None:
    for args in (["events"], ["state", "lessons"], ["events", "--json"]):
        cmd = (
            f"{sys.executable} -m memtape --memory-dir {memory} {' '.join(args)} | head -c 10 >/dev/null; "
            "echo ${PIPESTATUS[0]}"
        )
        done = subprocess.run(
            ["bash", "-c", cmd], capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "40"}
        )
        assert done.stdout.strip() == "0" and done.stderr == "", (args, done.stderr)


def test_sqlite_urls_absolute_relative_and_bare(memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = memory / "ledger.db"
    assert str(absolute).startswith("/")
    want = orjson.loads(run_cli("--memory-dir", str(memory), "stats", "--json").out)["count"]
    monkeypatch.chdir(memory.parent)
    for url in (f"sqlite:///{absolute}", f"sqlite:///{memory.name}/ledger.db", str(absolute), str(memory)):
        r = run_cli("--store", url, "stats", "--json")
        assert r.code == 0 and orjson.loads(r.out)["count"] == want, url
    r = run_cli("--store", "mysql://x/y", "stats")
    assert r.code == 1 and r.err.startswith("error: unsupported store URL")


def test_explain_never_merges_two_domains_facts_into_one_life(tmp_path: Path) -> None:
    from memtape.ledger.events import FactObserved

    with SqliteStore.open(tmp_path / "ledger.db") as store:
        store.append(
            [
                event(FactObserved(fact_type="quirk", key="blocking overlay", value=value), domain=domain)
                for domain, value in (
                    ("shop.test", 'click "Accept all cookies" first'),
                    ("news.test", 'click "Close" first'),
                )
            ]
        )
    r = run_cli("--memory-dir", str(tmp_path), "explain", "blocking overlay")
    assert (r.code, r.err) == (
        1,
        "error: fact key 'blocking overlay' is on 2 domains (news.test, shop.test): "
        "name the domain or give a fact id\n",
    )
    life = orjson.loads(
        run_cli("--memory-dir", str(tmp_path), "explain", "blocking overlay", "--domain", "news.test", "--json").out
    )["life"]
    assert [e["domain"] for e in life] == ["news.test"] and "Close" in life[0]["detail"]


def test_recall_takes_every_format_through_the_same_code(tmp_path: Path) -> None:
    mem = str(tmp_path / "m")
    assert run_cli("--memory-dir", mem, "start-run", "--goal", "x", "--url", "http://shop.test/").code == 0
    base = ["--memory-dir", mem, "recall", "tier1"]
    as_json = orjson.loads(run_cli(*base, "--json").out)
    assert len(as_json) == 3 and orjson.loads(run_cli(*base, "--format", "json").out) == as_json
    rows = list(csv.DictReader(io.StringIO(run_cli(*base, "--format", "csv").out)))
    assert [r["lesson_id"] for r in rows] == [l["lesson_id"] for l in as_json]
    table = run_cli(*base, "--format", "table").out
    assert all(l["lesson_id"] in table for l in as_json) and max(len(x) for x in table.splitlines()) <= 120
    out = tmp_path / "t1.parquet"
    assert run_cli(*base, "--format", "parquet", "--out", str(out)).code == 0 and pq.read_table(out).num_rows == 3
    steps = run_cli(
        "--memory-dir", mem, "recall", "trajectory", "--goal", "x", "--url", "http://shop.test/", "--format", "table"
    )
    assert steps.code == 0 and "no trajectory" in steps.out


def test_hashes_printed_for_comparison_are_whole(tmp_path: Path) -> None:
    source = tmp_path / "memory.json"
    source.write_text(
        '{"version": 1, "lessons": [{"lesson": "Wait for the page", "category": "best_practice", '
        '"created_at": "2026-03-12", "last_used": "2026-03-12"}]}'
    )
    mem = str(tmp_path / "m")
    assert run_cli("--memory-dir", mem, "import", str(source)).code == 0
    again = run_cli("--memory-dir", mem, "import", str(source)).out
    with SqliteStore.open(tmp_path / "m" / "ledger.db") as store:
        digest = next(iter(store.read(types=["memory_imported"]))).data["source_digest"]
        head = next(iter(store.read(from_seq=store.head()))).hash
    assert len(digest) == 64 and f"sha256 {digest})" in again
    copied = run_cli("copy", "--from", f"sqlite:///{tmp_path / 'm' / 'ledger.db'}", "--to", str(tmp_path / "c.db"))
    assert copied.code == 0 and f"(head {head})" in copied.out
