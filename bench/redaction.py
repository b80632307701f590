"""The door's secret scrubbing per event, beside the scrubber of an earlier revision in the same run.

What is timed is what the store does to each payload before it hashes it (`ledger.store`): the
screen over the payload's canonical JSON (`Redactor.may_contain_secrets`) and, when it cannot
clear it, the walk over every string (`Redactor.value`), in CPU time (the box's other processes
do not decide the ratio). Each side runs in its own process on the same payloads: this tree's
code, and the baseline's `ledger/` package taken from `git archive BASELINE` (the old rules),
alternated `--rounds` times; the figure is the median of the rounds' means.

Payloads: the synthetic agent log (`devtools/synthetic.py`: steps, grades, recalls, lessons, facts,
trajectories, sessions); as a second mix, the bundled sites' page texts as step observations
(long prose, where every keyword of the rule set may occur); and, as a third, `--hostile` seeded
adversarial strings (random runs of the token alphabet, what the patterns start with repeated,
near-miss tokens; 16 to 4,096 characters) as observations, whose mean and slowest one are given:
the worst case a caller can make the door pay.

Usage::

    python bench/redaction.py                      # baseline: the revision before the gitleaks rules
    python bench/redaction.py --baseline main --events 4000 --rounds 7 --hostile 100000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, "") and __name__ == "__main__":  # not when a worker loads this file
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BENCH = "redaction"
ROOT = Path(__file__).resolve().parent.parent
#: the last revision whose door had no maintained rule set (memtape's and detect-secrets' rules only)
DEFAULT_BASELINE = "89fbf54"


def _page_texts() -> list[str]:
    from html.parser import HTMLParser

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.parts: list[str] = []

        def handle_data(self, data: str) -> None:
            if data.strip():
                self.parts.append(data.strip())

    texts = []
    for page in sorted((ROOT / "agent" / "sites").rglob("*.html")):
        parser = Text()
        parser.feed(page.read_text(encoding="utf-8"))
        texts.append(" ".join(parser.parts)[:4000])
    return texts


#: what the door's patterns start with (and near misses of what they take), repeated by `hostile_texts`
_HOSTILE_UNITS = (
    "-----BEGIN ",
    "---- BEGIN SSH2 PRIVATE KEY ----\n",
    "Private-Lines: 9\nQUJD",
    "secret key\n",
    '"kty" "d": "',
    "/hooks/a1",
    "/aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3aB3",
    "aB3-",
    "x_",
    "12345678:",
    "1/2/",
    "api_key=",
    "token: ",
    "https://x.test/login?t=",
    "IBAN DE89 ",
    "4111 ",
    "123-45-",
    "password is ",
    "Bearer ",
    "%25",
    "\\u00",
    "eyJ",
)


def hostile_texts(count: int, seed: int = 20261204) -> list[str]:
    """`count` seeded adversarial strings: random runs of the token alphabet, units of
    `_HOSTILE_UNITS` repeated with noise between them, and prefixed tokens whose body just misses
    (no digits, hex one short, words)."""
    import random
    import string

    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "-_/:.=+ \n"
    out = []
    for i in range(count):
        size = int(16 * 256 ** rng.random())  # 16 to 4,096, log-uniform
        kind = i % 3
        if kind == 0:
            out.append("".join(rng.choice(alphabet) for _ in range(size)))
        elif kind == 1:
            unit = rng.choice(_HOSTILE_UNITS) + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
            out.append((unit * (size // len(unit) + 1))[:size])
        else:
            body = rng.choice(
                [
                    "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(20, 60))),
                    "".join(rng.choice("0123456789abcdef") for _ in range(31)),
                    "_".join(rng.choice(["user", "profile", "v2", "id", "2024", "cache"]) for _ in range(8)),
                ]
            )
            out.append(f"{rng.choice(['tok', 'KEY', 'app', 'x'])}{rng.choice('-_.')}{body}")
    return out


def payloads(events: int, hostile: int = 0) -> dict[str, list[dict[str, Any]]]:
    """The mixes, as the JSON-ready dicts the store redacts."""
    from devtools.synthetic import synthetic_events

    agent = []
    for ev in synthetic_events(events):
        data = ev.payload.model_dump(mode="json")
        data.pop("type", None)
        data.pop("schema_version", None)
        agent.append(data)
    pages = [
        {"domain": "site.test", "url": "http://site.test/", "observation": text, "step": i}
        for i, text in enumerate(_page_texts())
    ]
    mixes = {"agent": agent, "pages": pages}
    if hostile:
        mixes["hostile"] = [
            {"domain": "site.test", "observation": text, "step": i} for i, text in enumerate(hostile_texts(hostile))
        ]
    return mixes


def worker(path: Path, repeat: int) -> dict[str, float]:
    """CPU µs per payload of the door's screen and walk (run in the process whose `memtape.ledger`
    is the side measured)."""
    import orjson

    from memtape.ledger.redact import Redactor

    mixes = json.loads(path.read_text())
    out = {}
    for name, mix in mixes.items():
        texts = [orjson.dumps(d, option=orjson.OPT_SORT_KEYS).decode() for d in mix]
        redactor = Redactor()
        for data, text in list(zip(mix, texts))[:2000]:  # warm: rule sets read, patterns compiled
            if redactor.may_contain_secrets(text):
                redactor.value(data)
        if name == "hostile":
            # one pass, each payload timed on its own: the mean and the slowest one (100k strings
            # of up to 4 KB: a pass is what the box can afford)
            redactor = Redactor()
            times = []
            for data, text in zip(mix, texts):
                start = time.process_time()
                if redactor.may_contain_secrets(text):
                    redactor.value(data)
                times.append(time.process_time() - start)
            out[name] = sum(times) / len(mix) * 1e6
            out["hostile_worst"] = max(times) * 1e6
            continue
        best = float("inf")
        for _ in range(repeat):
            redactor = Redactor()  # a fresh one: no short string is known clean yet
            start = time.process_time()
            for data, text in zip(mix, texts):
                if redactor.may_contain_secrets(text):
                    redactor.value(data)
            best = min(best, time.process_time() - start)
        out[name] = best / len(mix) * 1e6
    return out


def _baseline_tree(rev: str, into: Path) -> Path:
    """`rev`'s `memtape` package (its `ledger/` and the package's own modules) under `into`."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _measure(tree: Path, data: Path, repeat: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("MEMTAPE_SECRET_PATTERNS", None)
    # this file is loaded by its path, so that `memtape` is the tree's (first on PYTHONPATH)
    code = (
        "import json, runpy, sys; from pathlib import Path; "
        "worker = runpy.run_path(sys.argv[1])['worker']; "
        'import memtape; print(json.dumps({**worker(Path(sys.argv[2]), int(sys.argv[3])), "from": memtape.__file__}))'
    )
    done = subprocess.run(
        [sys.executable, "-c", code, __file__, str(data), str(repeat)],
        env=env,
        cwd=tree,
        check=True,
        capture_output=True,
        text=True,
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    origin = figures.pop("from")
    if not origin.startswith(str(tree)):
        raise RuntimeError(f"the worker for {tree} imported memtape from {origin}")
    return {name: float(us) for name, us in figures.items()}


def run(
    quick: bool = False, events: int = 3000, rounds: int = 5, baseline: str = DEFAULT_BASELINE, hostile: int = 0
) -> list[Any]:
    from bench import Figure

    if quick:
        events, rounds, hostile = 600, 2, min(hostile, 2000)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "payloads.json"
        data.write_text(json.dumps(payloads(events, hostile)))
        old_tree = _baseline_tree(baseline, Path(tmp) / "baseline")
        new: dict[str, list[float]] = {}
        old: dict[str, list[float]] = {}
        for _ in range(rounds):
            for side, tree in ((new, ROOT), (old, old_tree)):
                for name, us in _measure(tree, data, 3).items():
                    side.setdefault(name, []).append(us)
    label = {
        "agent": "scrub one synthetic agent payload",
        "pages": "scrub one bundled site page as an observation",
        "hostile": f"scrub one of {hostile:,} adversarial strings",
        "hostile_worst": f"the slowest of {hostile:,} adversarial strings",
    }
    return [
        Figure(
            BENCH,
            f"{label[name]} (screen + walk, CPU)",
            statistics.median(new[name]),
            "µs",
            f"the door at {baseline}",
            statistics.median(old[name]),
            higher_is_better=False,
            note=f"{events} events, {hostile} hostile strings, median of {rounds} alternated rounds, best of 3 in each",
        )
        for name in new
    ]


def main() -> None:
    from bench import print_json, table

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--hostile", type=int, default=0, help="adversarial strings to add as a third mix")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = run(args.quick, args.events, args.rounds, args.baseline, args.hostile)
    if args.json:
        print_json(figures)
    else:
        from rich.console import Console

        Console().print(table("door redaction per event", figures))


if __name__ == "__main__":
    main()
