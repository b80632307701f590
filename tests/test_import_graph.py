"""Imports point one way and form no circle: every first-party import of the library and the face
sits at the top of its module (none hidden in a function to dodge a circle), and the graph of
those imports has no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {
    "ledger": "memtape.ledger",
    "projections": "memtape.projections",
    "agent": "memtape.agent",
    "analytics": "memtape.analytics",
    "memtape": "memtape",
}
#: first-party imports deliberately made when first needed, and why
LAZY = {
    ("memtape.ledger.location", "memtape.ledger.pgstore"): "psycopg loads only for a PostgreSQL URL",
    ("memtape", "memtape.api"): "the API loads on first use: `memtape.cli`, a module of the package, "
    "starts without the agent, the audit and the experiment",
    ("memtape", "memtape.asynchronous"): "the async API loads on first use, as the API does",
}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if folder == "memtape" and parts[0] in ("ledger", "projections", "agent", "analytics"):
                continue  # the links to the layers, read through their own folders
            name = ".".join((package, *parts)).removesuffix(".__init__")
            found[name] = path
    return found


MODULES = _modules()


def _imported(node: ast.Import | ast.ImportFrom, module: str, path: Path) -> list[str]:
    """The first-party modules one import statement loads."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
            for _ in range(node.level - 1):
                package = package.rsplit(".", 1)[0]
            base = f"{package}.{base}" if base else package
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
    return [n for n in names if n in MODULES]


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements a module runs when imported: its body and what a top-level `try` (an optional
    third-party package, `except ImportError`) holds; an import there is an edge like any other."""
    statements: list[ast.stmt] = []
    for node in body:
        statements.append(node)
        if isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                statements.extend(_module_level(block))
    return statements


def _graph() -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """Module-level edges, and every first-party import made inside a function or class."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    hidden = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        top = set(map(id, _module_level(tree.body)))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = _imported(node, module, path)
            if id(node) in top:
                edges[module].update(t for t in targets if t != module)
            else:
                hidden.extend((module, t, node.lineno) for t in targets if (module, t) not in LAZY)
    return edges, hidden


def test_no_first_party_import_is_hidden_in_a_function() -> None:
    _, hidden = _graph()
    assert hidden == [], "\n".join(f"{MODULES[m].relative_to(ROOT)}:{line} imports {t}" for m, t, line in hidden)


def test_the_import_graph_has_no_cycle() -> None:
    edges, _ = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                return stack[stack.index(target) :] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state:
            cycle = visit(module)
            assert cycle is None, " -> ".join(cycle)


def test_the_graph_sees_the_imports() -> None:
    """The checks above read real edges: the writer imports the decisions, the face the layers."""
    edges, _ = _graph()
    assert "memtape.projections.decisions" in edges["memtape.projections.writer"]
    assert "memtape.ledger.settings" in edges["memtape.commands"]
    assert len(MODULES) > 80


def _names_from(module: str, prefix: str) -> set[tuple[str, str]]:
    """(module, name) of every `from X import name` in `module` where X starts with `prefix`."""
    tree = ast.parse(MODULES[module].read_text())
    return {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(prefix)
        for alias in node.names
    } | {
        (alias.name, "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith(prefix)
    }


def test_the_analytics_mirror_reads_the_cache_through_one_door() -> None:
    """The mirror copies projections.db through one public function of the cache engine, so the
    engine's layout (interval blocks, keys, checkpoints) can change without touching analytics."""
    assert _names_from("memtape.analytics.mirror", "memtape.projections.cache") == {
        ("memtape.projections.cache.materialize", "interval_versions")
    }


def test_the_bundled_agent_reads_memory_only_through_the_api() -> None:
    """The bundled agent uses what an external agent can: no module of agent/ opens `MemoryView`
    (resume and fork are `Memory.resume_scenario` / `fork_scenario`)."""
    agent = [m for m in MODULES if m == "memtape.agent" or m.startswith("memtape.agent.")]
    assert agent and all(_names_from(m, "memtape.projections.view") == set() for m in agent)
