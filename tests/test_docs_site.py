"""The documentation site builds with `mkdocs build --strict` (a broken link or anchor, a missing
snippet, a docstring mkdocstrings cannot read fails it), into a temporary folder, and what is
generated from the code is there: the API from the docstrings, the command reference from the click
commands, the OpenAPI schema from the server's app."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import click
import pytest

import memtape
from memtape.cli import cli
from memtape.server import create_app
from tests.docs_support import ROOT

#: a seed document named by its number ("seed 001", "Seed 002's", "seed 00x"): the reader has no
#: such documents, so the site and the OpenAPI document say what the rule is instead
SEED_NUMBER = re.compile(r"\bseeds? (?:documents? )?0[0-9x]{2}\b", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("docs")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(work / "site"),
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return work / "site"


def test_the_command_reference_lists_every_command(site: Path) -> None:
    html = (site / "cli-reference" / "index.html").read_text()
    for name in cli.list_commands(click.Context(cli)):
        assert f'id="memtape-{name}"' in html, name


def test_the_api_page_documents_the_public_names(site: Path) -> None:
    html = (site / "api" / "index.html").read_text()
    for name in (
        "memtape.open",
        "memtape.Memory",
        "memtape.Run",
        "memtape.Lesson",
        "memtape.Policy",
        "memtape.MemtapeError",
        "memtape.Run.record_step",
        "memtape.Memory.start_run",
        "memtape.Memory.audit",
    ):
        assert f'id="{name}"' in html, name


def test_the_api_page_lists_public_names_only(site: Path) -> None:
    """Plumbing of the memory and of a run (what a face or the runner uses) is not on the page, and
    every name there is `memtape.NAME` or a public member of one."""
    html = (site / "api" / "index.html").read_text()
    documented = re.findall(r'id="(memtape\.[^"]+)"', html)
    assert len(documented) >= 60 and not [n for n in documented if "._" in n]
    for internal in ("once", "event", "append_to_run", "scrub", "current", "now", "timed", "take_step_ms"):
        assert not [n for n in documented if n.endswith(f".{internal}")], internal
    assert {n.split(".")[1] for n in documented} == set(memtape.__all__)


def test_the_api_page_shows_start_run_with_every_parameter(site: Path) -> None:
    html = (site / "api" / "index.html").read_text()
    text = re.sub(r"<[^>]+>", "", html)
    start = text.index("start_run(\n")  # the generated signature, one parameter a line
    signature = text[start : text.index(") -&gt; Run", start)]
    parameters = [p for p in inspect.signature(memtape.Memory.start_run).parameters if p != "self"]
    assert len(parameters) == 11 and all(f"{p}:" in signature for p in parameters), signature
    prose = (ROOT / "docs" / "api.md").read_text()
    assert all(f"| `{p}` |" in prose for p in parameters)


def test_the_openapi_document_is_the_apps(site: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp, memtape.open(tmp) as memory:
        schema = create_app(memory, token="any").openapi()  # as devtools/mkdocs_hooks.py builds it
    assert json.loads((site / "openapi.json").read_text()) == schema
    html = (site / "http" / "index.html").read_text()
    for path in schema["paths"]:
        assert path in html, path


def test_the_readme_sections_are_included(site: Path) -> None:
    """Getting started includes the README's install and quick start rather than a copy of them."""
    html = (site / "getting-started" / "index.html").read_text()
    assert "memtape[analytics]" in html and "# Run 2:" in html and "--8&lt;--" not in html


def seed_numbers(text: str) -> list[str]:
    """Each seed number in `text`, with the words around it (to find the docstring it came from)."""
    return [text[max(0, m.start() - 60) : m.end() + 60] for m in SEED_NUMBER.finditer(text)]


def test_the_seed_number_check_finds_what_it_looks_for() -> None:
    found = seed_numbers("rep 1 (Seed 002's reps); seed 00x; seeds 001; seed documents 003; Seed documents")
    assert len(found) == 4 and not seed_numbers("the seeds 1, 2 and the seed lessons; seed 1001")


def test_the_built_site_names_no_seed_number(site: Path) -> None:
    """Every page, the generated API and command reference, and the search index built from them."""
    found = {
        str(path.relative_to(site)): hits
        for path in sorted(site.rglob("*"))
        if path.suffix in {".html", ".json", ".js", ".xml", ".txt"} and (hits := seed_numbers(path.read_text()))
    }
    assert not found, found


def test_the_served_openapi_document_names_no_seed_number() -> None:
    with tempfile.TemporaryDirectory() as tmp, memtape.open(tmp) as memory:
        schema = json.dumps(create_app(memory).openapi())
    assert not seed_numbers(schema), seed_numbers(schema)
