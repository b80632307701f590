"""Rendering of audits and explanations: rich text for terminals, self-contained HTML.

The data come from `audit.audit_run` and `explain.explain_item` (plain
dicts); nothing here reads the ledger.
"""

from __future__ import annotations

import html
import sys
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memtape.projections.text import clip


def _origin(o: dict[str, Any] | None) -> str:
    if not o:
        return "-"
    where = o.get("run_id") or "(no run)"
    if o.get("step") is not None:
        where += f"#{o['step']}"
    return f"{where} seq {o['seq']} ({o['type']})"


def _x(value: Any, style: str = "") -> Text:
    """Data (page text, goals, errors) as literal text: never rich markup."""
    return Text("" if value is None else str(value), style=style)


def _console() -> Console:
    return Console() if sys.stdout.isatty() else Console(width=160)


def _read(prompt: dict[str, Any]) -> str:
    """What the model read on the call of a step prompt, when a system prompt came with it."""
    if prompt.get("system_seq") is None:
        return ""
    return f"; read with the system prompt (seq {prompt['system_seq']}): {prompt['read_tokens']} tokens"


def _counted(prompt: dict[str, Any]) -> str:
    """What counted a prompt's tokens, as the audit says it (nothing when the event does not tell)."""
    return f" (counted by {prompt['counted_by']})" if prompt.get("counted_by") else ""


def audit_text(data: dict[str, Any], console: Console | None = None) -> None:
    """Print an audit as rich tables, one block per step."""
    console = console or _console()
    run = data.get("run") or {}
    out = data.get("outcome") or {}
    console.print(
        Text.assemble(
            (f"Run {data['run_id']}", "bold"),
            (
                f": {run.get('goal', '?')!r} on {run.get('domain') or '-'} "
                f"(mode {run.get('mode', '?')}, memory {'on' if run.get('memory_enabled', True) else 'off'}"
                + (f", parent {run['parent_run_id']}" if run.get("parent_run_id") else "")
                + ")"
                + (f" -> {'success' if out.get('success') else 'failure'} in {out.get('turns')} turns" if out else "")
            ),
        )
    )
    for s in data["steps"]:
        console.rule(_x(f"step {s['step']}  (memory as of seq {s['as_of_seq']}, {s.get('domain') or '-'})"))
        for p in s["prompt"]:
            t = Table(
                title=_x(
                    f"{p['prompt']} prompt at seq {p['seq']}: {p['total_tokens']}/{p['budget']} tokens"
                    + _counted(p)
                    + _read(p)
                ),
                title_justify="left",
            )
            for c in ("source", "prio", "tokens", "text", "came from"):
                t.add_column(c, overflow="fold", no_wrap=c in ("prio", "tokens"))
            for it in p["items"]:
                t.add_row(
                    _x(it["source"]),
                    str(it["priority"]),
                    str(it["tokens"]),
                    _x(clip(it["text"], 120)),
                    _x("; ".join(_origin(o) for o in it["origins"]) or "-"),
                )
            for it in p["trimmed"]:
                t.add_row(
                    _x(f"trimmed: {it['source']}", "dim"),
                    str(it["priority"]),
                    str(it["tokens"]),
                    _x(clip(it["text"], 120), "dim"),
                    _x("; ".join(_origin(o) for o in it["origins"]) or "-"),
                )
            console.print(t)
        mem = s["memory"]
        t = Table(title="memory", title_justify="left")
        for c in ("kind", "item", "detail", "taught by"):
            t.add_column(c, overflow="fold")
        for l in mem["tier1"]:
            t.add_row(
                "Tier 1",
                _x(clip(l["lesson"], 100)),
                _x(f"{l['category']}, used {l['use_count']}x"),
                _x(_origin(l["taught_by"])),
            )
        for r in mem["recalled"]:
            label = f"{r['kind']} recall (seq {r['seq']})"
            if not r["lessons"]:
                t.add_row(label, "[dim]no match[/dim]", "", "")
            for l in r["lessons"]:
                t.add_row(
                    label,
                    _x(clip(l.get("lesson") or l["lesson_id"], 100)),
                    _x(l.get("category") or ""),
                    _x(_origin(l.get("taught_by"))),
                )
        if mem["trajectory"]:
            tr = mem["trajectory"]
            t.add_row(
                "trajectory",
                _x(f"{tr['trajectory_id']}: {tr.get('matched_goal')}"),
                f"similarity {tr.get('similarity')}{', replayed' if tr.get('replay') else ''}",
                _x(_origin(tr.get("taught_by"))),
            )
        for f in mem["facts"]:
            t.add_row(
                "fact",
                _x(f"{f['fact_type']}:{f['key']} = {f['value']}"),
                f"confidence {f['confidence']}",
                _x(_origin(f["taught_by"])),
            )
        for sel in mem["selectors"]:
            t.add_row(
                "selector",
                _x(f"{sel['role']} {sel['name']!r} -> {sel['selector']}"),
                f"{sel['successes']} ok / {sel['failures']} failed",
                _x(_origin(sel["taught_by"])),
            )
        console.print(t)
        a = s.get("action")
        if a:
            result = ("ok", "green") if a["ok"] else ("error", "red")
            console.print(
                Text.assemble(
                    f"action (seq {a['seq']}): {a['command']} {a['args']} -> ",
                    result,
                    "" if a["ok"] else f": {a.get('error')}",
                    f"   {a['url_before']} -> {a['url_after']}" if a.get("url_after") else "",
                )
            )
        if s.get("grade"):
            g = s["grade"]
            console.print(
                _x(
                    f"grade: {g['outcome']}"
                    + (f" — {g['reason']}" if g.get("reason") else "")
                    + (f"; instead: {g['correction']}" if g.get("correction") else "")
                )
            )


def credit_line(credit: dict[str, Any] | None) -> str:
    """An item's credit in one line (`memtape credit` measures it)."""
    if credit is None:
        return "credit: not measured (memtape credit)"
    sign = {1: "positive", 0: "zero", -1: "negative"}[credit["credit"]]
    return (
        f"credit: {sign}: changed {credit['changed']} of {credit['shown']} decisions it was shown, saved "
        f"{credit['turns_saved']} turns and {credit['tokens_saved']} tokens, success changed in "
        f"{credit['success_changed']} runs, over {len(credit['runs'])} runs ({credit['method']})"
    )


def explain_text(data: dict[str, Any], console: Console | None = None) -> None:
    console = console or _console()
    console.print(Text.assemble((f"{data['kind']} {data['item']}", "bold"), f": {data['status']}"))
    if data.get("recalled_in_runs"):
        console.print(_x(f"recalled in runs: {', '.join(data['recalled_in_runs'])}"))
    console.print(_x(credit_line(data.get("credit"))))
    t = Table(title="life", title_justify="left")
    for c in ("seq", "at", "stage", "run", "step", "domain", "detail"):
        t.add_column(c, overflow="fold", no_wrap=c != "detail")  # the detail wraps, not every column
    for e in data["life"]:
        detail = e["detail"] + (f" (confidence {e['confidence']})" if e.get("confidence") is not None else "")
        t.add_row(
            str(e["seq"]),
            e["at"][:19].replace("T", " "),
            _x(e["stage"]),
            _x(e["run_id"] or "-"),
            "-" if e["step"] is None else str(e["step"]),
            _x(e["domain"] or "-"),
            _x(detail),
        )
    console.print(t)


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222}h1{font-size:20px}
h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ccc}table{border-collapse:collapse;margin:8px 0 16px}
td,th{border:1px solid #ddd;padding:3px 8px;vertical-align:top;text-align:left}th{background:#f4f4f4}
.dim{color:#888}.ok{color:#080}.err{color:#b00}"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(headers: list[str], rows: list[list[Any]], raw: bool = False) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else _e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>{body}</body></html>\n"
    )


def audit_html(data: dict[str, Any]) -> str:
    """A self-contained HTML page of an audit (no scripts, no external resources)."""
    run = data.get("run") or {}
    parts = [
        f"<p>Goal {_e(run.get('goal'))} on {_e(run.get('domain'))}, mode {_e(run.get('mode'))}, memory "
        f"{'on' if run.get('memory_enabled', True) else 'off'}.</p>"
    ]
    for s in data["steps"]:
        parts.append(f"<h2>Step {s['step']} <span class=dim>(memory as of seq {s['as_of_seq']})</span></h2>")
        for p in s["prompt"]:
            rows = [
                [
                    _e(i["source"]),
                    i["priority"],
                    i["tokens"],
                    _e(i["text"]),
                    _e("; ".join(_origin(o) for o in i["origins"])),
                ]
                for i in p["items"]
            ]
            rows += [
                [
                    f"<span class=dim>trimmed: {_e(i['source'])}</span>",
                    i["priority"],
                    i["tokens"],
                    f"<span class=dim>{_e(i['text'])}</span>",
                    _e("; ".join(_origin(o) for o in i["origins"])),
                ]
                for i in p["trimmed"]
            ]
            parts.append(
                f"<p>{_e(p['prompt'])} prompt (seq {p['seq']}): {p['total_tokens']}/{p['budget']} tokens"
                f"{_e(_counted(p) + _read(p))}</p>"
            )
            parts.append(_table(["source", "priority", "tokens", "text", "came from"], rows, raw=True))
        mem = s["memory"]
        rows = [["Tier 1", l["lesson"], l["category"], _origin(l["taught_by"])] for l in mem["tier1"]]
        rows += [
            [f"{r['kind']} recall", l.get("lesson") or l["lesson_id"], l.get("category"), _origin(l.get("taught_by"))]
            for r in mem["recalled"]
            for l in r["lessons"]
        ]
        if mem["trajectory"]:
            tr = mem["trajectory"]
            rows.append(
                ["trajectory", tr["trajectory_id"], f"similarity {tr.get('similarity')}", _origin(tr.get("taught_by"))]
            )
        rows += [
            [
                "fact",
                f"{f['fact_type']}:{f['key']} = {f['value']}",
                f"confidence {f['confidence']}",
                _origin(f["taught_by"]),
            ]
            for f in mem["facts"]
        ]
        rows += [
            [
                "selector",
                f"{x['role']} {x['name']} -> {x['selector']}",
                f"{x['successes']}/{x['failures']}",
                _origin(x["taught_by"]),
            ]
            for x in mem["selectors"]
        ]
        parts.append(_table(["memory", "item", "detail", "taught by"], rows))
        a = s.get("action")
        if a:
            res = "<span class=ok>ok</span>" if a["ok"] else f"<span class=err>error: {_e(a.get('error'))}</span>"
            parts.append(f"<p>Action (seq {a['seq']}): <code>{_e(a['command'])} {_e(a['args'])}</code> → {res}</p>")
    return _page(f"Audit of run {data['run_id']}", "".join(parts))


def explain_html(data: dict[str, Any]) -> str:
    rows = [
        [
            e["seq"],
            e["at"],
            e["stage"],
            e["run_id"] or "-",
            "-" if e["step"] is None else e["step"],
            e["domain"] or "-",
            e["detail"],
        ]
        for e in data["life"]
    ]
    body = f"<p>Status: {_e(data['status'])}</p><p>{_e(credit_line(data.get('credit')))}</p>" + _table(
        ["seq", "at", "stage", "run", "step", "domain", "detail"], rows
    )
    return _page(f"{data['kind']} {data['item']}", body)
