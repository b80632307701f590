"""Bad input to the analytics commands (and every `--out`): one `error:` line, a non-zero exit, and
nothing written — above all, no answer written over ledger.db or any other file of the memory
directory, whatever `--out` names there."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtape.analytics.queries import ANALYSES
from tests.cli_runner import run_cli
from tests.test_security_forget import build_memory


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A memory whose mirror is current (so that a read writes nothing)."""
    mem = tmp_path_factory.mktemp("bad_input") / "memory"
    mem.mkdir(mode=0o700)
    build_memory(mem)
    assert run_cli("--memory-dir", str(mem), "analytics", "runs", "--format", "json").code == 0
    return mem


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def _refused(r: object, code: int | None = None) -> None:
    assert r.code != 0 and (code is None or r.code == code), (r.code, r.err)  # type: ignore[attr-defined]
    assert not r.out and r.err.startswith("error: ") and r.err.count("\n") == 1, r.err  # type: ignore[attr-defined]


#: what a slip of `--out` can name in the memory directory
MEMORY_NAMES = [
    "ledger.db",
    "ledger.db-wal",
    "ledger.db-shm",
    "ledger.head",
    "projections.db",
    "projections.db-wal",
    "projections.key",
    "analytics.duckdb",
    "analytics.duckdb.wal",
    "analytics.duckdb.seal",
    "fork.json",
    "answer.json",
]
#: commands that write an answer to `--out FILE`
WRITERS = [("analytics", name, "--format", fmt) for name in ANALYSES for fmt in ("json", "csv", "parquet", "table")] + [
    ("audit", "run_keep_0", "--json"),
    ("audit", "run_keep_0", "--format", "csv"),
    ("explain", "lsn_axolotl_tip", "--format", "json"),
    ("experiment", "--format", "json"),
    ("export", "--format", "memory-json"),
    ("export", "--format", "csv"),
    ("runs", "--format", "json"),
    ("events", "--format", "json"),
    ("state", "--format", "json"),
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(MEMORY_NAMES), writer=st.sampled_from(WRITERS), via=st.sampled_from(["plain", "dot", "store"])
)
def test_no_answer_is_written_over_the_memorys_files(
    memory: Path, name: str, writer: tuple[str, ...], via: str
) -> None:
    before = _files(memory)
    out = {"plain": str(memory / name), "dot": f"{memory}/./{name}", "store": str(memory / name)}[via]
    store = ("--store", f"sqlite:///{memory / 'ledger.db'}") if via == "store" else ()
    r = run_cli("--memory-dir", str(memory), *store, *writer, "--out", out)
    _refused(r, 2)
    assert "memory's own directory" in r.err
    assert _files(memory) == before


def test_an_answer_may_go_to_a_subdirectory_of_the_memory(memory: Path) -> None:
    """Only the memory's own directory is refused: an answer may be written below it."""
    sub = memory / "answers"
    sub.mkdir(exist_ok=True)
    r = run_cli("--memory-dir", str(memory), "analytics", "runs", "--format", "csv", "--out", str(sub / "runs.csv"))
    assert r.code == 0, r.err
    assert (sub / "runs.csv").read_text().startswith("run_id,")


_weird = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=60)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    args=st.one_of(
        st.tuples(
            st.just("--section"),
            st.one_of(
                _weird,
                st.sampled_from(["'; DROP TABLE events; --", "runs; SELECT 1", "../../etc/passwd", "x" * 10_000]),
            ),
        ),
        st.tuples(st.just("--format"), _weird.filter(lambda f: f not in ("table", "json", "csv", "parquet"))),
        st.tuples(st.sampled_from(["--limit", "--as-of", "--step", "--run"]), st.integers(-(2**70), 2**70).map(str)),
        st.tuples(_weird.filter(lambda a: not a.startswith("-"))),
    ),
    name=st.sampled_from(sorted(ANALYSES)),
)
def test_bad_arguments_are_one_line_and_write_nothing(memory: Path, args: tuple[str, ...], name: str) -> None:
    before = _files(memory)
    r = run_cli("--memory-dir", str(memory), "analytics", name, *args)
    _refused(r)
    assert "Traceback" not in r.err
    assert _files(memory) == before


@pytest.mark.parametrize("place", ["missing", "empty", "a file", "a file inside"])
def test_no_memory_is_one_line_and_creates_nothing(tmp_path: Path, place: str) -> None:
    target = {
        "missing": tmp_path / "nowhere",
        "empty": tmp_path / "empty",
        "a file": tmp_path / "plain.txt",
        "a file inside": tmp_path / "plain.txt" / "memory",
    }[place]
    if place == "empty":
        target.mkdir()
    if place.startswith("a file"):
        (tmp_path / "plain.txt").write_text("not a memory")
    before = _files(tmp_path)
    for name in ANALYSES:
        _refused(run_cli("--memory-dir", str(target), "analytics", name))
    assert _files(tmp_path) == before
