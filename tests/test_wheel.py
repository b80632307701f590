"""One import name: the wheel holds only `memtape/` (and its .dist-info), and installed into a
fresh virtualenv beside a project with its own `agent` and `analytics` packages, both import in
one process without mixing."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_IGNORE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", "out",
                                       ".agent-memory", ".hypothesis", "*.db")

USER_PROJECT_CHECK = r'''
import agent, agent.loop, analytics
import memtape
from memtape.agent import memory
from memtape.analytics import audit
assert agent.loop.WHOSE == "mine" and analytics.WHOSE == "mine", "the project's own packages"
assert not hasattr(agent, "memory") and not hasattr(analytics, "audit"), "memtape leaked into the project's packages"
assert memory.__name__ == "memtape.agent.memory" and "site-packages" in memory.__file__
assert memtape.open and memtape.MemtapeError
import memtape.cli
print("ok", memtape.__file__)
'''


def build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=SOURCE_IGNORE)
    out = tmp / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out)], check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("memtape-*.whl")
    return wheel


def test_the_wheel_installs_one_import_name_beside_a_project_with_its_own_agent(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"memtape", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}

    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    py = env / "bin" / "python"
    # the dependencies come from the test environment's site-packages (no download); memtape from the wheel
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True, timeout=300)

    project = tmp_path / "project"
    (project / "agent").mkdir(parents=True)
    (project / "analytics").mkdir()
    (project / "agent" / "__init__.py").write_text("")
    (project / "agent" / "loop.py").write_text('WHOSE = "mine"\n')
    (project / "analytics" / "__init__.py").write_text('WHOSE = "mine"\n')
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the wheel's memtape, not a checkout's
    done = subprocess.run([str(py), "-c", USER_PROJECT_CHECK], cwd=project, capture_output=True, text=True,
                          timeout=120, env=clean)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok ") and str(env) in done.stdout
    cli = subprocess.run([str(env / "bin" / "memtape"), "--memory-dir", str(tmp_path / "mem"), "recall", "tier1"],
                         cwd=project, capture_output=True, text=True, timeout=120, env=clean)
    assert (cli.returncode, cli.stdout) == (0, "no lessons\n"), cli.stderr
