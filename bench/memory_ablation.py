"""What each memory section is worth to the bundled agent: one pass of the suite per arm, each
from empty memory, with one section of the prompt (or one memory switch) off, beside the arm
with every section on, measured in the same run.

Arms: `all on`; each prompt section of `agent/prompt.py` `MEMORY_SECTIONS` left out; the
`Thresholds` switches `seed_lessons`, `learned_patterns` and `replay` off; and `memory off`. For each
arm: passes, turns and tokens, and Δturns / Δtokens against `all on` (positive: the arm costs
more, so the section saves that much). A pass starts from an empty ledger, so what a section
is worth here is what it is worth to a first pass over the suite (memory learned from the
earlier tasks of the same pass).

Usage::

    python bench/memory_ablation.py            # the bundled suite, every arm
    python bench/memory_ablation.py --json     # the table as JSON
    python bench/memory_ablation.py --cases FILE --arms tier1,replay
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memtape.agent.prompt import MEMORY_SECTIONS
from memtape.agent.runner import run_pass
from memtape.agent.sites import CASES_FILE, load_cases
from memtape.ledger.store import SqliteStore
from memtape.projections.parameters import Thresholds

SWITCHES = ("seed_lessons", "learned_patterns", "replay")
ARMS = ("all on", *MEMORY_SECTIONS, *(f"{s}=false" for s in SWITCHES), "memory off")


def arm(name: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """One pass of `cases` from empty memory with the arm's section or switch off."""
    sections = frozenset({name}) if name in MEMORY_SECTIONS else frozenset()
    switch = name.removesuffix("=false")
    thresholds = Thresholds(**({switch: False} if switch in SWITCHES else {}))
    with (
        tempfile.TemporaryDirectory(prefix="memtape-ablation-") as tmp,
        SqliteStore.open(Path(tmp) / "ledger.db") as store,
    ):
        results = run_pass(
            store,
            Path(tmp) / "projections.db",
            cases,
            memory=name != "memory off",
            thresholds=thresholds,
            sections_off=sections,
        )
    return {
        "arm": name,
        "passes": sum(r.outcome.success for r in results),
        "tasks": len(results),
        "turns": sum(r.outcome.turns for r in results),
        "tokens": sum(r.tokens for r in results),
    }


def table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with Δturns and Δtokens against the arm with every section on."""
    base = next(r for r in rows if r["arm"] == "all on")
    return [{**r, "d_turns": r["turns"] - base["turns"], "d_tokens": r["tokens"] - base["tokens"]} for r in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    parser.add_argument("--cases", default=str(CASES_FILE), help="cases file (default: the bundled suite)")
    parser.add_argument("--arms", default="", help="comma-separated arms besides `all on` (default: every arm)")
    args = parser.parse_args(argv)
    chosen = [a.strip() for a in args.arms.split(",") if a.strip()] or list(ARMS[1:])
    unknown = [a for a in chosen if a not in ARMS]
    if unknown:
        parser.error(f"unknown arm {unknown[0]!r}; known: {', '.join(ARMS)}")
    cases = load_cases(args.cases)
    rows = table([arm(name, cases) for name in ["all on", *chosen]])
    if args.json:
        print(json.dumps({"bench": "memory_ablation", "cases": len(cases), "arms": rows}, indent=2))
        return 0
    print(f"{'arm':<24} {'passes':>7} {'turns':>6} {'tokens':>8} {'Δturns':>7} {'Δtokens':>8}")
    for r in rows:
        passes = f"{r['passes']}/{r['tasks']}"
        print(f"{r['arm']:<24} {passes:>7} {r['turns']:>6} {r['tokens']:>8} {r['d_turns']:>+7} {r['d_tokens']:>+8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
