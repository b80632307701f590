"""Agents in other languages against a live `memtape serve`: examples/node-agent.mjs (Node's
built-in fetch, no packages), and examples/typescript-agent.ts through a client generated from
`/openapi.json` by openapi-typescript, whose types refuse a misspelt field. Each runs twice; the
second run recalls what the first taught."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import memtape
from tests.server_support import live_server

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "node-agent.mjs"


def test_node_agent_second_run_recalls_the_first(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node, "Node.js 18+ is needed for the JavaScript client test (Debian: apt-get install nodejs)"
    memory = tmp_path / "memory"
    with live_server(memory) as served:  # the token the server made and kept in the memory directory
        assert served.token
        done = subprocess.run(
            [node, str(EXAMPLE), served.base, served.token], capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["first"]["recalled"] == [] and result["first"]["errors"] == 1
    assert "Accept the cookie banner before clicking Buy" in result["second"]["recalled"]
    assert result["second"]["errors"] == 0
    with memtape.open(memory) as mem:
        runs = {r["run_id"]: r for r in mem.state("runs")}
        assert runs[result["first"]["run"]]["status"] == runs[result["second"]["run"]]["status"] == "completed"
        built = [ev for ev in mem.store.read(run_id=result["second"]["run"], types=["context_built"])]
        taught = {ev.id for ev in mem.store.read(run_id=result["first"]["run"], types=["lesson_recorded"])}
    assert built and taught & {i for item in built[0].payload.items for i in item.event_ids}


#: the generator, its fetch client and the compiler, pinned: the cache is keyed by these versions
NODE_PACKAGES = {
    "openapi-typescript": "7.13.0",
    "openapi-fetch": "0.17.0",
    "typescript": "5.9.3",
    "@types/node": "20.19.39",
}
TS_AGENT = EXAMPLE.parent / "typescript-agent.ts"
#: what the generated types refuse to compile: each line marked with the error tsc must name there
WRONG = """import createClient from "openapi-fetch";
import type { components, paths } from "./memtape-api.js";
const memtape = createClient<paths>({ baseUrl: "http://127.0.0.1:9" });
export async function wrong(): Promise<void> {
  const started = await memtape.POST("/runs", { body: { goal: "g", start_url: "https://shop.example/" } });
  const nope: string = started.data!.nope;  // TS2339 no such field in the answer
  const step: components["schemas"]["StepBody"] = { step: 1, action: "click", sensitve: true };  // TS2561 no such field in a body
  await memtape.POST("/runs/{run_id}/steps", { params: { path: { run_id: "r" } }, body: step });
  const tier1 = await memtape.GET("/runs/{run_id}/tier1", { params: { path: { run_id: "r" } } });
  const uses: string = tier1.data![0].use_count;  // TS2322 a count is a number
  await memtape.GET("/runs/{run_id}/step_memories", { params: { path: { run_id: "r" }, query: { intent: "buy" } } });  // TS2741 elements are required
  await memtape.POST("/runs/{run_id}/lessons", { params: { path: { run_id: "r" } }, body: { text: "t", category: "site_spcific" } });  // TS2820 a category the schema does not list
  await memtape.POST("/runs/{run_id}/facts", { params: { path: { run_id: "r" } }, body: { kind: "quirk", key: "k", value: "v", domian: "d" } });  // TS2561 a misspelt inline field
  console.log(nope, uses);
}
"""
TSCONFIG = {
    "compilerOptions": {
        "target": "es2022",
        "module": "nodenext",
        "moduleResolution": "nodenext",
        "strict": True,
        "outDir": "out",
        "lib": ["es2022", "dom"],
        "types": ["node"],
    },
    "files": ["agent.ts", "wrong.ts"],
}


def node_tools(npm: str) -> Path:
    """NODE_PACKAGES installed once into a cache outside the repository (XDG_CACHE_HOME or
    ~/.cache), in a folder named by their versions: later runs install nothing. The install is made
    in a folder of its own and renamed into place, so a run that stops half-way leaves nothing used."""
    manifest = json.dumps({"private": True, "dependencies": NODE_PACKAGES}, sort_keys=True)
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memtape-tests"
    folder = home / f"node-client-{hashlib.sha256(manifest.encode()).hexdigest()[:12]}"
    if (folder / "installed").is_file():
        return folder
    home.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=home, prefix=".installing-"))
    (staging / "package.json").write_text(manifest)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=staging,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (staging / "installed").write_text(manifest)
    try:
        staging.rename(folder)
    except OSError:  # another run installed it meanwhile
        shutil.rmtree(staging)
    return folder


def test_a_typescript_client_generated_from_the_openapi_document_runs_two_runs(tmp_path: Path) -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, (
        "Node.js 18+ and npm are needed for the TypeScript client test (Debian: apt-get install nodejs npm)"
    )
    tools = node_tools(npm) / "node_modules"
    work = tmp_path / "client"
    work.mkdir()
    (work / "node_modules").symlink_to(tools, target_is_directory=True)
    (work / "package.json").write_text('{"type": "module"}')
    (work / "tsconfig.json").write_text(json.dumps(TSCONFIG))
    shutil.copy(TS_AGENT, work / "agent.ts")
    (work / "wrong.ts").write_text(WRONG)
    memory = tmp_path / "memory"
    with live_server(memory) as served:
        generated = subprocess.run(
            [
                node,
                str(tools / ".bin" / "openapi-typescript"),
                f"{served.base}/openapi.json",
                "--default-non-nullable",
                "false",
                "-o",
                str(work / "memtape-api.ts"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert generated.returncode == 0, generated.stderr
        compiled = subprocess.run(
            [node, str(tools / "typescript" / "bin" / "tsc"), "-p", str(work)],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=600,
        )
        errors = sorted(set(re.findall(r"^(\S+)\((\d+),\d+\): error (TS\d+)", compiled.stdout, re.M)))
        marked = sorted(
            ("wrong.ts", str(n), m.group(1))
            for n, line in enumerate(WRONG.splitlines(), 1)
            if (m := re.search(r"// (TS\d+)", line))
        )
        assert errors == marked, compiled.stdout  # the agent compiles; each wrong use is refused by type
        assert served.token
        done = subprocess.run(
            [node, str(work / "out" / "agent.js"), served.base, served.token],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    first, second = result["first"], result["second"]
    assert (first["recalled"], first["errors"], first["sessions_before"]) == ([], 1, [])
    assert "Accept the cookie banner before clicking Buy" in second["recalled"] and second["errors"] == 0
    assert second["sessions_before"] == [True] and "#accept" in second["selectors_before"]
    assert first["trajectory_steps"] > 0 and result["audit_steps"] == 1
    assert result["refused"] == {"status": 409, "error": f"run '{second['run']}' is already completed"}
    with memtape.open(memory) as mem:
        runs = {r["run_id"]: r for r in mem.state("runs")}
        assert runs[first["run"]]["status"] == runs[second["run"]]["status"] == "completed"
        steps = list(mem.store.read(run_id=first["run"], types=["step_recorded"]))
        replies = list(mem.store.read(types=["request_answered"]))
    assert [s.step for s in steps] == [1, 2, 3]  # the step sent twice under one Idempotency-Key is one step
    assert steps[0].data["think"] == "buy the socks" and steps[0].data["env_before"]["elements"]
    assert steps[0].data["duration_ms"] == 120 and steps[0].data["target"]["selector"] == "#buy"
    assert len(replies) == 2  # one answer kept per key, one key per run
