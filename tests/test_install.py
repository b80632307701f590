"""What `pip install memtape` gives. The wheel holds one import name, `memtape`; installed without
extras into a fresh virtualenv (the dependencies at the versions of requirements/lock.txt, from the
package index or pip's cache) it brings none of the heavy packages and stays under the size bound,
two runs, recall and the audit work through `import memtape` beside a project with its own `agent`
and `analytics` packages, the core commands answer, and a command whose extra is missing exits 1
with the one line naming it. With `[all]` the commands of every extra start."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "lock.txt"
SOURCE_IGNORE = shutil.ignore_patterns(
    ".venv",
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "out",
    ".agent-memory",
    ".hypothesis",
    "*.db",
    ".mypy_cache",
    ".ruff_cache",
    ".import_linter_cache",
)
#: distributions the core must not install (the issue's list)
HEAVY = {"playwright", "duckdb", "pyarrow", "fastapi", "uvicorn", "matplotlib", "openai", "mcp", "browser-use"}
#: the core's site-packages (memtape and its dependencies), in bytes
CORE_BOUND = 100 * 1024 * 1024

#: a command needing an extra -> the arguments to run it with, what the line names, the extra
NEEDS_EXTRA = [
    (["analytics", "runs"], "analytics", "analytics"),
    (["report", "--out", "rep"], "report", "analytics"),
    (["watch", "--timeout", "1"], "watch", "analytics"),
    (["run", "--goal", "Open the shop", "--url", "http://shop.test/"], "run", "agent"),
    (["demo"], "demo", "agent"),
    (["serve"], "serve", "server"),
    (["mcp"], "mcp", "mcp"),
    (["--store", "postgresql://memtape@localhost/memtape", "stats"], "postgresql:// store", "postgres"),
    (["runs", "--format", "parquet", "--out", "runs.parquet"], "--format parquet", "analytics"),
]

#: two runs through the public API (the second recalls what the first learned), then the audit;
#: run from a project whose own `agent` and `analytics` packages must stay its own
TWO_RUNS = r"""
import json, sys
import agent, agent.loop, analytics
import memtape
from memtape.agent import prompt
from memtape.projections import recording
assert agent.loop.WHOSE == "mine" and analytics.WHOSE == "mine", "the project's own packages"
assert not hasattr(agent, "prompt") and not hasattr(analytics, "audit"), "memtape leaked into the project's packages"
assert prompt.__name__ == "memtape.agent.prompt" and "site-packages" in prompt.__file__, prompt.__file__
assert recording.__name__ == "memtape.projections.recording" and "site-packages" in recording.__file__, recording.__file__

SHOP, BLOCKED = "https://shop.example/", "<div class=cookies> intercepts pointer events"
with memtape.open(sys.argv[1]) as mem:
    with mem.start_run(goal='Add "Wool Socks" to the cart', start_url=SHOP) as run:
        run.tier1()
        run.record_step(step=1, action="click", target='button "Add to cart"', ok=False, error=BLOCKED)
        run.record_step(step=2, action="click", target='button "Accept all cookies"')
        run.record_step(step=3, action="click", target='button "Add to cart"', url_after=SHOP + "cart")
        run.record_lesson("If a banner intercepts a click, accept the banner, then click again.",
                          category="error_recovery", failed_command="click", error_pattern="cookies", step=3)
        run.observe_fact(kind="quirk", key="cookie banner", value="blocks clicks until accepted", step=3)
        run.finish(success=True, outcome="socks in the cart")
    with mem.start_run(goal='Add "Wool Socks" to the cart', start_url=SHOP) as run:
        tips = run.recall_domain(step=1)
        fixes = run.recall_error(command="click", error=BLOCKED, step=1)
        run.record_step(step=1, action="click", target='button "Accept all cookies"')
        run.finish(success=True, outcome="socks in the cart")
    audit = mem.audit(run.run_id)
    lessons = mem.state("lessons")
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"duckdb", "pyarrow", "numpy", "matplotlib", "playwright",
                                                          "openai", "fastapi", "uvicorn", "mcp", "psycopg", "browser_use"})
print(json.dumps({"tips": [t.text for t in tips], "fixes": [l.text for l in fixes], "run": run.run_id,
                  "audit_steps": len(audit["steps"]), "lessons": [l.lesson_id for l in lessons], "heavy": heavy,
                  "memtape": memtape.__file__}))
"""


def _clean_env() -> dict[str, str]:
    """The environment without what would point the fresh venv at this checkout or at some memory."""
    return {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MEMTAPE_DIR", "MEMTAPE_STORE", "VIRTUAL_ENV")
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=SOURCE_IGNORE)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp / "dist"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = (tmp / "dist").glob("memtape-*.whl")
    return built


def _venv(where: Path, wheel: Path, extras: str = "") -> Path:
    """A fresh virtualenv (no pip of its own) with the wheel and its dependencies at the lock's versions."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=300)
    py = where / "bin" / "python"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "-c", str(LOCK), f"{wheel}{extras}"],
        capture_output=True,
        text=True,
        timeout=1500,
        env=_clean_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return py


def _site_packages(py: Path) -> Path:
    out = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        env=_clean_env(),
    ).stdout
    return Path(out.strip())


def _distributions(py: Path) -> set[str]:
    script = "import importlib.metadata as m, json; print(json.dumps([d.metadata['Name'] for d in m.distributions()]))"
    out = subprocess.run([str(py), "-c", script], check=True, capture_output=True, text=True, env=_clean_env()).stdout
    return {name.lower().replace("_", "-") for name in json.loads(out)}


def _project(tmp: Path) -> Path:
    """A user's project with packages named like memtape's layers."""
    project = tmp / "project"
    (project / "agent").mkdir(parents=True)
    (project / "analytics").mkdir()
    (project / "agent" / "__init__.py").write_text("")
    (project / "agent" / "loop.py").write_text('WHOSE = "mine"\n')
    (project / "analytics" / "__init__.py").write_text('WHOSE = "mine"\n')
    return project


def _two_runs(py: Path, project: Path, memory: Path) -> dict[str, object]:
    done = subprocess.run(
        [str(py), "-c", TWO_RUNS, str(memory)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _memtape(py: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(py.parent / "memtape"), *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=_clean_env()
    )


def test_the_wheel_holds_one_import_name_and_its_metadata(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"
    assert {name.split("/")[0] for name in names} == {"memtape", dist_info}
    assert "memtape/py.typed" in names and f"{dist_info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata and "Project-URL: Source" in metadata
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert requires and not [line for line in requires if "==" in line.split(";")[0]], "ranges, never pins"
    for extra in ("agent", "analytics", "server", "mcp", "postgres", "browser-use", "all"):
        assert f"Provides-Extra: {extra}" in metadata


@pytest.mark.timeout(900)
def test_the_core_install_is_small_and_answers_without_any_extra(tmp_path: Path, wheel: Path) -> None:
    py = _venv(tmp_path / "venv", wheel)
    installed = _distributions(py)
    assert "memtape" in installed and not installed & HEAVY, installed & HEAVY
    site = _site_packages(py)
    size = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink())
    assert size < CORE_BOUND, f"{size / 2**20:.0f} MiB in {len(installed)} distributions"

    project = _project(tmp_path)
    memory = tmp_path / "memory"
    out = _two_runs(py, project, memory)
    assert str(tmp_path / "venv") in str(out["memtape"]) and out["heavy"] == []
    assert out["tips"] and "If a banner intercepts a click, accept the banner, then click again." in out["fixes"]
    assert out["audit_steps"] == 1 and out["lessons"]

    mem = ["--memory-dir", str(memory)]
    recall = _memtape(py, project, *mem, "recall", "tier1", "--json")
    assert recall.returncode == 0 and isinstance(json.loads(recall.stdout), list), recall.stderr
    for args in (
        ["audit", str(out["run"])],
        ["explain", str(out["lessons"][0])],
        ["state", "lessons", "--as-of", "5"],
        ["verify"],
        ["experiment", "--set", "promotion_min_uses=1"],
        ["export", "--format", "memory-json", "--out", str(tmp_path / "memory.json")],
    ):
        done = _memtape(py, project, *mem, *args)
        assert done.returncode == 0 and done.stdout, (args, done.stderr)
    imported = _memtape(py, project, "--memory-dir", str(tmp_path / "other"), "import", str(tmp_path / "memory.json"))
    assert imported.returncode == 0, imported.stderr
    forgot = _memtape(py, project, *mem, "forget", "--domain", "shop.example")
    assert forgot.returncode == 0 and "forgot domain shop.example" in forgot.stdout, forgot.stderr

    for args, what, extra in NEEDS_EXTRA:
        done = _memtape(py, project, *mem, *args)
        line = f"memtape {what} needs the {extra} extra: pip install 'memtape[{extra}]'\n"
        assert (done.returncode, done.stdout, done.stderr) == (1, "", line), args
    assert not (project / "rep").exists() and not (project / "runs.parquet").exists()

    adapter = subprocess.run(
        [str(py), "-c", "import memtape.integrations.browser_use"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env=_clean_env(),
    )
    assert adapter.returncode == 1 and adapter.stderr.strip().endswith(
        "MissingExtra: memtape browser-use integration needs the browser-use extra: pip install 'memtape[browser-use]'"
    )
    script = (
        "import memtape\ntry:\n    memtape.open('postgresql://memtape@localhost/memtape')\n"
        "except memtape.MemtapeError as exc:\n    print(exc)"
    )
    opened = subprocess.run(
        [str(py), "-c", script], cwd=project, capture_output=True, text=True, timeout=120, env=_clean_env()
    )
    assert opened.stdout == "memtape postgresql:// store needs the postgres extra: pip install 'memtape[postgres]'\n", (
        opened.stderr
    )


@pytest.mark.stress
@pytest.mark.timeout(2400)  # installs ~170 distributions (from pip's cache once it is warm)
def test_with_every_extra_the_command_line_starts_each_command(tmp_path: Path, wheel: Path) -> None:
    py = _venv(tmp_path / "venv", wheel, "[all]")
    assert _distributions(py) >= HEAVY
    project = _project(tmp_path)
    memory = tmp_path / "memory"
    out = _two_runs(py, project, memory)
    mem = ["--memory-dir", str(memory)]
    analytics = _memtape(py, project, *mem, "analytics", "runs", "--json")
    assert analytics.returncode == 0 and len(json.loads(analytics.stdout)["runs"]) == 2, analytics.stderr
    report = _memtape(py, project, *mem, "report", "--out", str(tmp_path / "report"))
    assert report.returncode == 0 and list((tmp_path / "report").glob("*.html")), report.stderr
    parquet = _memtape(py, project, *mem, "runs", "--format", "parquet", "--out", str(tmp_path / "runs.parquet"))
    assert parquet.returncode == 0 and (tmp_path / "runs.parquet").stat().st_size > 0, parquet.stderr
    audit = _memtape(py, project, *mem, "audit", str(out["run"]), "--json")
    assert audit.returncode == 0 and json.loads(audit.stdout)["run_id"] == out["run"], audit.stderr
    for command in ("run", "demo", "serve", "mcp", "watch"):
        done = _memtape(py, project, command, "--help")
        assert done.returncode == 0 and done.stdout.startswith(f"Usage: memtape {command}"), (command, done.stderr)
    postgres = _memtape(py, project, "--store", "postgresql://memtape@127.0.0.1:1/memtape", "stats")
    assert postgres.returncode == 1 and "needs the" not in postgres.stderr and len(postgres.stderr.splitlines()) == 1
    adapter = subprocess.run(
        [str(py), "-c", "import memtape.integrations.browser_use as b; print(b.BrowserUseMemory.__name__)"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(),
    )
    assert (adapter.returncode, adapter.stdout) == (0, "BrowserUseMemory\n"), adapter.stderr[-2000:]


@pytest.mark.timeout(900)
def test_the_build_warns_of_nothing(tmp_path: Path) -> None:
    """Every folder the package ships (SQL, rule files, the bundled sites, the viewer's pages) is
    declared, so building the wheel, or the editable wheel `pip install -e .` builds, warns of
    nothing (setuptools once warned of 20 data folders absent from `packages`)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=SOURCE_IGNORE)
    for hook in ("build_wheel", "build_editable"):
        done = subprocess.run(
            [sys.executable, "-c", f"from setuptools import build_meta; build_meta.{hook}({str(tmp_path / hook)!r})"],
            cwd=src,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        warned = {m.group(1) for m in re.finditer(r"(\w+Warning: .*)$", done.stderr, re.M)}
        assert warned == set(), sorted(warned)[:5]
        assert list((tmp_path / hook).glob("memtape-*.whl"))
