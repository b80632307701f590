"""MkDocs hooks (mkdocs.yml `hooks:`): the HTTP page's OpenAPI schema, taken from the server's
FastAPI app while the site builds, so the page can never drift from the routes. `<!-- openapi -->`
on a page becomes a table of the routes (with the error statuses each declares) and one of every
schema's fields (bodies and answers), and the whole document is
published beside the pages as `openapi.json`. Pages include README sections (`--8<--`) from the
repository root wherever mkdocs is run from."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

import memtape
from memtape.server import create_app

MARKER = "<!-- openapi -->"
METHODS = ("get", "post", "put", "patch", "delete")


@functools.cache
def openapi_schema() -> dict[str, Any]:
    """The document `GET /openapi.json` serves; the app needs an open memory, so a throw-away one,
    and a token, as `memtape serve` has unless told --no-token (the bearer scheme is then declared)."""
    with tempfile.TemporaryDirectory() as tmp, memtape.open(tmp) as memory:
        return create_app(memory, token="any").openapi()


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type(schema: dict[str, Any]) -> str:
    """A schema as a reader says it: `string`, `integer or null`, `array of object`, a link to a body."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    return str(kind)


def _answer(operation: dict[str, Any]) -> str:
    ok = [(code, r) for code, r in operation.get("responses", {}).items() if code.startswith("2")]
    parts = []
    for code, response in ok:
        schema = response.get("content", {}).get("application/json", {}).get("schema", {})
        parts.append(f"{code} {_type(schema)}" if schema else code)
    return ", ".join(parts)


def _refusals(operation: dict[str, Any]) -> str:
    """The error statuses a route declares (each answers the `Error` schema)."""
    return ", ".join(code for code in operation.get("responses", {}) if not code.startswith("2"))


def render(schema: dict[str, Any]) -> str:
    """Markdown: the routes (method, path, parameters, body, answer, errors), then every schema's fields."""
    lines = ["| route | parameters | body | answer | errors ([Error](#error)) |", "|---|---|---|---|---|"]
    for path, item in schema["paths"].items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            params = [
                f"`{p['name']}` ({p['in']}, {_type(p.get('schema', {}))}{', required' if p.get('required') else ''})"
                for p in operation.get("parameters", [])
            ]
            body = operation.get("requestBody", {}).get("content", {})
            body_type = ", ".join(
                _type(c.get("schema", {})) + ("" if kind == "application/json" else f" ({kind})")
                for kind, c in body.items()
            )
            route = f"`{method.upper()} {path}`<br>{operation.get('summary', '')}"
            lines.append(
                f"| {_cell(route)} | {_cell('<br>'.join(params))} | {_cell(body_type)} | "
                f"{_cell(_answer(operation))} | {_refusals(operation)} |"
            )
    for name, body_schema in schema.get("components", {}).get("schemas", {}).items():
        lines += ["", f"### {name}", ""]
        if body_schema.get("description"):
            lines += [_cell(body_schema["description"]), ""]
        required = set(body_schema.get("required", []))
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, spec in body_schema.get("properties", {}).items():
            lines.append(
                f"| `{field}` | {_cell(_type(spec))} | {'yes' if field in required else 'no'} | {_cell(spec.get('description', ''))} |"
            )
    return "\n".join(lines)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """pymdownx.snippets reads paths from the working directory; point it at mkdocs.yml's folder."""
    config.mdx_configs.setdefault("pymdownx.snippets", {})["base_path"] = [str(Path(config.config_file_path).parent)]
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, "openapi.json", content=json.dumps(openapi_schema(), indent=2)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return markdown.replace(MARKER, render(openapi_schema())) if MARKER in markdown else markdown
