"""examples/node-agent.mjs: a JavaScript agent (Node's built-in fetch, no packages) runs twice
against a live `memtape serve`; the second run recalls what the first taught."""
from __future__ import annotations

import json
import shutil
import subprocess
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
        done = subprocess.run([node, str(EXAMPLE), served.base, served.token], capture_output=True, text=True, timeout=120)
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
