"""The door's figures for the docs' "Trust" page (docs/trust.md): every event type's sample line with each field
removed, and with each of the adversary's values (tests/schema_strategies.py HOSTILE) put in each field
an adversary would try; how many `append --raw` refuses (one line, nothing written), and whether
`memtape schema` agrees on every one.

    .venv/bin/python scripts/door_figures.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.ledger_samples import sample_line  # noqa: E402
from tests.schema_strategies import HOSTILE, KEYS, TYPES  # noqa: E402
from tests.test_schema_roundtrip import VALIDATOR, accepted  # noqa: E402


def main() -> None:
    tried = refused = disagree = 0
    for type_ in TYPES:
        base = sample_line(type_, run_id="r1", step=1, domain="example.com", occurred_at="2026-01-01T00:00:00Z")
        lines = [{k: v for k, v in base.items() if k != key} for key in base]
        lines += [{**base, key: value} for key in sorted({*KEYS, *base}) for value in HOSTILE]
        for line in lines:
            ok = accepted(line)
            tried += 1
            refused += not ok
            if ok != VALIDATOR.is_valid(line):
                disagree += 1
                print("schema and append disagree:", line)
    print(
        f"{tried} lines tried ({len(TYPES)} types), {refused} refused in one line with nothing written, "
        f"{tried - refused} accepted; schema and append disagree on {disagree}"
    )
    sys.exit(1 if disagree else 0)


if __name__ == "__main__":
    main()
