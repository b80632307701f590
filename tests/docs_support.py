"""The documentation as the tests read it: the README, then the pages of docs/ in the order of
mkdocs.yml's `nav` (the order a reader meets them), and their fenced code blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SKIP = re.compile(r"<!-- docs-test: skip \((.+?)\) -->")


def nav_pages() -> list[Path]:
    """docs/ pages in nav order (mkdocs.yml holds no python tags, so safe_load reads it)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    names: list[str] = []

    def walk(items: list[object]) -> None:
        for item in items:
            if isinstance(item, str):
                names.append(item)
            elif isinstance(item, dict):
                for value in item.values():
                    if isinstance(value, list):
                        walk(value)
                    else:
                        names.append(value)

    walk(config["nav"])
    return [DOCS / name for name in names]


def pages() -> list[Path]:
    return [README, *nav_pages()]


def page(name: str) -> str:
    """One page's markdown, by its path under docs/ (`cli.md`)."""
    return (DOCS / name).read_text()


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    skip: str | None  # the reason given in `<!-- docs-test: skip (reason) -->`, or None: it runs
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(language: str) -> list[Block]:
    """Every ```language block of every page, in reading order, with the HTML comments just above it."""
    fence = re.compile(rf"((?:^<!--[^\n]*-->\n)*)^```{language}\n(.*?)^```$", re.S | re.M)
    found = []
    for path in pages():
        text = path.read_text()
        for m in fence.finditer(text):
            skip = SKIP.search(m.group(1))
            found.append(Block(path, text.count("\n", 0, m.start(2)) + 1, skip.group(1) if skip else None, m.group(2)))
    return found
