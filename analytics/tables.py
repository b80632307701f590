"""Audit and explain answers as tables, so they take `--format table|json|csv|parquet` like every
other analytics command (one row per step, per prompt item, per memory item, per life event).

`--json` keeps giving the nested document (`audit_run` / `explain_item`); these flat sections are
for spreadsheets, DuckDB and parquet.

Usage::

    emit(audit_report(audit_run(store, "run_1")), "csv", section="prompt_items")
"""

from __future__ import annotations

from typing import Any

from memtape.analytics.tabular import Report, Table

#: the tables of `audit_report` and `explain_report`, the first being the main one
AUDIT_SECTIONS = ("steps", "prompt_items", "memory")
EXPLAIN_SECTIONS = ("life", "now", "recalled_in_runs")
_TAUGHT = ("taught_by_run", "taught_by_step", "taught_by_seq", "taught_by_type")


def _taught(origin: dict[str, Any] | None) -> tuple[Any, ...]:
    if not origin:
        return (None, None, None, None)
    return (origin.get("run_id"), origin.get("step"), origin.get("seq"), origin.get("type"))


def _origins(origins: list[dict[str, Any]] | None) -> list[str]:
    return [
        f"{o.get('run_id') or '-'}#{o.get('step') if o.get('step') is not None else '-'} seq {o.get('seq')} "
        f"({o.get('type')})"
        for o in origins or ()
    ]


def _lesson_row(step: int, kind: str, lesson: dict[str, Any]) -> tuple[Any, ...]:
    detail = f"{lesson.get('category')}, used {lesson.get('use_count')}x" if lesson.get("category") else None
    return (step, kind, lesson.get("lesson_id"), lesson.get("lesson"), detail, *_taught(lesson.get("taught_by")))


def _memory_rows(step: int, memory: dict[str, Any]) -> list[tuple[Any, ...]]:
    rows = [_lesson_row(step, "tier1", lesson) for lesson in memory.get("tier1") or ()]
    for recall in memory.get("recalled") or ():
        rows += [
            _lesson_row(step, f"{recall['kind']} recall (seq {recall['seq']})", lesson)
            for lesson in recall.get("lessons") or ()
        ]
    traj = memory.get("trajectory")
    if traj:
        rows.append(
            (
                step,
                "trajectory",
                traj["trajectory_id"],
                traj.get("matched_goal") or traj.get("goal"),
                f"similarity {traj.get('similarity')}, replay {traj.get('replay')}",
                *_taught(traj.get("taught_by")),
            )
        )
    for f in memory.get("facts") or ():
        rows.append(
            (
                step,
                "fact",
                f["fact_id"],
                f"{f['fact_type']}:{f['key']} = {f['value']}",
                f"confidence {f['confidence']}",
                *_taught(f.get("taught_by")),
            )
        )
    for s in memory.get("selectors") or ():
        rows.append(
            (
                step,
                "selector",
                s["selector"],
                f"{s['role']} {s['name']!r} -> {s['selector']}",
                f"{s['successes']} ok / {s['failures']} failed",
                *_taught(s.get("taught_by")),
            )
        )
    return rows


def audit_report(data: dict[str, Any]) -> Report:
    """Sections: `steps` (the main one), `prompt_items` (kept and trimmed), `memory`."""
    steps = Table(
        [
            "step",
            "as_of_seq",
            "domain",
            "command",
            "args",
            "target_text",
            "ok",
            "error",
            "decided_by",
            "url_after",
            "grade",
            "correction",
            "prompt_tokens",
            "read_tokens",
            "prompt_items",
            "trimmed_items",
        ],
        title=f"run {data['run_id']}: steps",
    )
    items = Table(
        ["step", "prompt_seq", "prompt", "kept", "source", "priority", "tokens", "truncated", "text", "origins"],
        title="prompt items (what the model was shown, and what the budget trimmed)",
    )
    memory = Table(["step", "kind", "item", "text", "detail", *_TAUGHT], title="memory as of each step")
    for s in data["steps"]:
        action, grade = s.get("action") or {}, s.get("grade") or {}
        prompts = s.get("prompt") or []
        steps.rows.append(
            (
                s["step"],
                s["as_of_seq"],
                s.get("domain"),
                action.get("command"),
                action.get("args"),
                action.get("target_text"),
                action.get("ok"),
                action.get("error"),
                action.get("decided_by"),
                action.get("url_after"),
                grade.get("outcome"),
                grade.get("correction"),
                sum(p.get("total_tokens") or 0 for p in prompts),
                sum(p.get("read_tokens") or 0 for p in prompts),
                sum(len(p.get("items") or ()) for p in prompts),
                sum(len(p.get("trimmed") or ()) for p in prompts),
            )
        )
        for p in prompts:
            for kept, group in ((True, p.get("items") or ()), (False, p.get("trimmed") or ())):
                for it in group:
                    items.rows.append(
                        (
                            s["step"],
                            p["seq"],
                            p.get("prompt"),
                            kept,
                            it.get("source"),
                            it.get("priority"),
                            it.get("tokens"),
                            it.get("truncated"),
                            it.get("text"),
                            _origins(it.get("origins")),
                        )
                    )
        memory.rows += _memory_rows(s["step"], s.get("memory") or {})
    return Report(f"Audit of run {data['run_id']}", dict(zip(AUDIT_SECTIONS, (steps, items, memory))))


def explain_report(data: dict[str, Any]) -> Report:
    """Sections: `life` (the main one), `now` (the item as it stands), `recalled_in_runs`."""
    life = Table.from_records(
        data.get("life") or [],
        ["seq", "at", "recorded_at", "stage", "type", "run_id", "step", "domain", "detail"],
        title=f"{data['kind']} {data['item']}: life",
    )
    now = data.get("now")
    current = now if isinstance(now, list) else ([now] if now else [])  # facts and selectors: one row per match
    tables = (
        life,
        Table.from_records(current, title=f"now: {data.get('status')}"),
        Table(["run_id"], [(r,) for r in data.get("recalled_in_runs") or ()], title="recalled in runs"),
    )
    return Report(f"Life of {data['kind']} {data['item']}", dict(zip(EXPLAIN_SECTIONS, tables)))
