"""Write `tests/data/gitleaks_examples.json`: the literal examples gitleaks' own rule tests ship.

gitleaks' `cmd/generate/config/rules/*.go` builds each rule and validates it against true positives
(`tps`) and false positives (`fps`); most are generated at random, some are written out. This keeps
the written ones (an element of a `tps`/`fps` list that is one string literal), by rule id, so
`tests/test_gitleaks_rules.py` can check that the translated rules find what gitleaks finds.

    git -C GITLEAKS archive v8.30.1 cmd/generate/config/rules | tar -x -C /tmp/gl
    python devtools/gitleaks_examples.py /tmp/gl/cmd/generate/config/rules > tests/data/gitleaks_examples.json
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

_FUNC = re.compile(r"^func \w+\(", re.M)
_RULE_ID = re.compile(r'RuleID:\s*"([^"]+)"')
_LIST = re.compile(r"\b([tf]ps)\s*(?::=\s*\[\]string\{|=\s*append\(\s*[tf]ps\s*,)")
_CLOSE = {"{": "}", "(": ")", "[": "]"}


def _elements(src: str, start: int, closer: str) -> list[str]:
    """The top-level elements of a Go list that opens just before `start` and ends at `closer`."""
    depth, out, piece, i = 0, [], [], start
    while i < len(src):
        c = src[i]
        if c == "`":
            end = src.index("`", i + 1)
            piece.append(src[i : end + 1])
            i = end + 1
            continue
        if c == '"':
            j = i + 1
            while src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            piece.append(src[i : j + 1])
            i = j + 1
            continue
        if src.startswith("//", i):
            i = src.index("\n", i)
            continue
        if c in _CLOSE:
            depth += 1
        elif c in ")}]":
            if depth == 0:
                out.append("".join(piece).strip())
                return [e for e in out if e]
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(piece).strip())
            piece = []
        else:
            piece.append(c)
        i += 1
    raise ValueError("an unclosed list")


def _literal(element: str) -> str | None:
    if re.fullmatch(r"`[^`]*`", element, re.S):
        return element[1:-1]
    if re.fullmatch(r'"(?:[^"\\\n]|\\.)*"', element):
        return str(ast.literal_eval(element))
    return None


def examples(rules_dir: Path) -> dict[str, dict[str, list[str]]]:
    found: dict[str, dict[str, list[str]]] = {}
    for path in sorted(rules_dir.glob("*.go")):
        src = path.read_text()
        starts = [m.start() for m in _FUNC.finditer(src)] + [len(src)]
        for begin, end in zip(starts, starts[1:]):
            body = src[begin:end]
            rule = _RULE_ID.search(body)
            if rule is None:
                continue
            for m in _LIST.finditer(body):
                closer = "}" if m.group().endswith("{") else ")"
                for element in _elements(body, m.end(), closer):
                    text = _literal(element)
                    if text is not None:
                        found.setdefault(rule.group(1), {"tps": [], "fps": []})[m.group(1)].append(text)
    return found


if __name__ == "__main__":
    json.dump(examples(Path(sys.argv[1])), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
