"""The documentation site builds with `mkdocs build --strict` (a broken link or anchor, a missing
snippet, a docstring mkdocstrings cannot read fails it), into a temporary folder, and what is
generated from the code is there: the API from the docstrings, the command reference from the click
commands, the OpenAPI schema from the server's app."""

from __future__ import annotations

import json
import os
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
