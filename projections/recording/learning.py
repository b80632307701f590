"""Post-run learning: pure functions over a run's steps (seeds 000–003), no ledger access.

What a finished run teaches — failure→recovery lessons, facts, selector outcomes,
the trajectory and patterns of a success, graded steps — as payloads; `Run.finish`
turns them into events in the transaction that writes run_completed.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any, cast

from memtape.ledger.credentials import passwords
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.events import (
    FactObserved,
    FactType,
    LessonRecorded,
    LessonsUsed,
    PatternLearned,
    PatternUsed,
    Payload,
    RunCompleted,
    SelectorFailed,
    SelectorSucceeded,
    SessionRecorded,
    StepGraded,
    TrajectoryRecorded,
    TrajectoryStep,
)
from memtape.ledger.redact import masked_args
from memtape.ledger.urls import url_parts
from memtape.projections.folds.knowledge import LOAD_TIME, SHADOW_DOM, fill_fails_key
from memtape.projections.folds.lessons import lesson_id_for
from memtape.projections.pattern_learning import learn_patterns
from memtape.projections.recording.values import Learned, StepRecord
from memtape.projections.text import domain_of, origin_of, quoted_name

#: seed 001's known error phrases, in the order its agent tries them: the first one an error
#: contains is the lesson's error_pattern ("... not visible; Timeout 5000ms exceeded" is `timeout`)
KNOWN_PATTERNS = (
    "too many arguments",
    "intercepts pointer events",
    "timeout",
    "element is not visible",
    "element is not enabled",
    "frame was detached",
    "target closed",
    "navigation interrupted",
)
DISMISS = re.compile(r"\b(accept|agree|allow|close|dismiss|got it|ok|okay|no thanks|continue|reject)\b", re.I)
SAFE_KEYS = {"Enter", "Escape", "Tab", "ArrowDown", "ArrowUp", "PageDown", "PageUp", "Space", "Backspace"}

#: errors that only say the element was not there (seed 001's agent skips them): they teach nothing
NO_CAUSE = ("not found", "no such element")
#: an error shorter than this (stripped) teaches nothing; exactly this long is kept
MIN_ERROR_CHARS = 10
#: a lesson's error_pattern without a known phrase: the error's first line, lower-cased, cut to this
PATTERN_CHARS = 80
#: a lesson's text quotes the error's first line, in its own case, cut to this
QUOTE_CHARS = 60


def error_pattern(error: str) -> str:
    """The key phrase of an error, as seed 001's agent picks it: the first of `KNOWN_PATTERNS` (in
    list order) the error contains, else its first line lower-cased and cut to `PATTERN_CHARS`."""
    low = (error or "").lower()
    for p in KNOWN_PATTERNS:
        if p in low:
            return p
    return low.strip().split("\n")[0][:PATTERN_CHARS]


def quoted_error(error: str) -> str:
    """The error as a lesson quotes it: its first line in its own case, cut to `QUOTE_CHARS`."""
    return error.strip().split("\n")[0][:QUOTE_CHARS]


def command_name(command: str) -> str:
    """The command of a command line: its first word, after a `playwright-cli` prefix."""
    parts = command.split()
    if len(parts) >= 2 and parts[0] == "playwright-cli":
        return parts[1]
    return parts[0] if parts else ""


def substantive(error: str | None) -> bool:
    """Seed 001: only a substantive error teaches a lesson — one that does not merely say the
    element was not there (`NO_CAUSE`) and is at least `MIN_ERROR_CHARS` long once stripped."""
    if not error or len(error.strip()) < MIN_ERROR_CHARS:
        return False
    low = error.lower()
    return not any(phrase in low for phrase in NO_CAUSE)


def goal_secrets(goal: str) -> list[str]:
    """Passwords a goal gives (`log in as "u" using "p"`, `... with password "p"`), read as the policy
    reads them; they are scrubbed from every payload of the run and typed again on replay."""
    return passwords(goal)


# ---- post-run learning (pure functions over the steps) -----------------------------------------


def _describe_recovery(steps: Sequence[StepRecord], i: int) -> str:
    """What step i did, in tool syntax, without page text (lessons are universal)."""
    s = steps[i]
    command = command_name(s.command)
    nxt = steps[i + 1] if i + 1 < len(steps) else None
    if command == "click" and nxt is not None and nxt.ok and command_name(nxt.command) == "type":
        return "click(ref) to focus the element, then type(text)"
    if command == "press":
        key = str(s.args.get("key", ""))
        return f"press(key='{key}')" if key in SAFE_KEYS else "press(key)"
    return {
        "click": "click(ref) on a different element",
        "type": "type(text)",
        "fill": "fill(ref, value)",
        "wait": "wait() for the page to settle",
        "scroll": "scroll(direction)",
        "back": "back()",
        "goto": "goto(url)",
        "select": "select(ref, value)",
    }.get(command, f"{command}()")


def _same_target(failed: StepRecord, later: StepRecord) -> bool:
    """Whether `later` acts on what `failed` acted on: the same element, or (a step without one,
    such as a key press or a navigation) the same command with the same arguments."""
    if failed.identity != (None, None):
        return later.identity == failed.identity
    return command_name(later.command) == command_name(failed.command) and later.args == failed.args


def recovery_of(steps: Sequence[StepRecord], i: int) -> int | None:
    """The index of the step that cleared step i's failure, or None when nothing did.

    The obstacle cleared where the failed command later succeeds on the same target: the recovery
    is the step right before that success (an ok step after step i), not the step that merely came
    next; a step that succeeded but left the same failure in place (the same command failing on
    the same target after it) is no recovery. Where another tool succeeded on the same target
    instead (fill fails, click on the field then type), that step is the recovery."""
    failed = steps[i]
    for k in range(i + 1, len(steps)):
        later = steps[k]
        if not later.ok or not _same_target(failed, later):
            continue
        if command_name(later.command) == command_name(failed.command):
            return k - 1 if k - 1 > i and steps[k - 1].ok else None
        again = any(
            not s.ok and command_name(s.command) == command_name(failed.command) and _same_target(failed, s)
            for s in steps[k + 1 :]
        )
        return None if again else k
    return None


def cleared_recalls(
    steps: Sequence[StepRecord], recalls: Sequence[RecordedEvent], relearned: Collection[str | None] = ()
) -> list[tuple[type[Payload], dict[str, Any], int | None, str | None]]:
    """The uses a run's recalls on error earned: a recall's pending lessons count once where the
    decisions after it cleared the failure it was asked on (`recovery_of`, with no other failure on
    the way); a recall followed by a step that succeeded but left the obstacle in place earns none.
    A lesson the run learns again (`relearned`: its dedup counts that use) is not counted twice."""
    at = {s.step: i for i, s in enumerate(steps)}
    out: list[tuple[type[Payload], dict[str, Any], int | None, str | None]] = []
    for ev in recalls:
        i = at.get(ev.step) if ev.step is not None else None
        if i is None or steps[i].ok:
            continue
        k = recovery_of(steps, i)
        if k is None or not all(s.ok for s in steps[i + 1 : k + 1]):
            continue
        ids = [lid for lid in dict.fromkeys(ev.data.get("pending_ids") or ()) if lid not in relearned]
        if ids:
            fields = {
                "recall_step": ev.step,
                "cleared_at": steps[k].step,
                "recalled_at": ev.occurred_at,
                "lesson_ids": ids,
            }
            out.append((LessonsUsed, fields, steps[k].step, ev.domain))
    return out


def extract_lessons(steps: Sequence[StepRecord]) -> list[tuple[str, int, LessonRecorded]]:
    """Seed 001's failure→recovery extraction, plus site-specific overlay lessons.

    Step N command A fails with a substantive error, and the step that cleared it
    (`recovery_of`: the step after which A succeeded on the same target) is command
    B ≠ A (`command_name`s): an error_recovery lesson (failed_command A,
    `error_pattern` of the error, the text quoting `quoted_error`). A failure that
    nothing cleared teaches nothing, nor does a step that succeeded but left the same
    failure in place. A step the approval hook rejected was never executed: it fails
    nothing. Several failures cleared by one step teach it once; the same recovery
    seen twice in a run is recorded twice: the writer deduplicates the second, so
    it is one lesson used twice. A click intercepted
    by an overlay that a later click on a dismiss button cleared (the blocked
    element then worked): a site_specific lesson scoped to that domain, naming
    the button as quoted data.
    """
    out: list[tuple[str, int, LessonRecorded]] = []
    seen: set[str] = set()
    cleared: set[int] = set()
    for i, a in enumerate(steps):
        failed = command_name(a.command)
        if a.ok or a.decided_by == "approval" or not failed or not substantive(a.error):
            continue
        r = recovery_of(steps, i)
        if r is None or r in cleared:
            continue
        cleared.add(r)
        b = steps[r]
        recovery = command_name(b.command)
        if not recovery or failed == recovery:
            continue
        pattern = error_pattern(a.error or "")
        text = f"When {failed} fails with '{quoted_error(a.error or '')}', try {_describe_recovery(steps, r)}."
        lid = lesson_id_for(failed, pattern, None, text)
        out.append(
            (
                a.domain,
                a.step,
                LessonRecorded(
                    lesson_id=lid,
                    lesson=text,
                    category="error_recovery",
                    failed_command=failed,
                    error_pattern=pattern,
                    learned_from=[x for x in (a.event_id, b.event_id) if x],
                ),
            )
        )
    for i, a in enumerate(steps):
        if a.ok or a.command != "click" or "intercepts pointer events" not in (a.error or ""):
            continue
        for j in range(i + 1, len(steps)):
            m = steps[j]
            if not (m.ok and m.command == "click" and m.name and DISMISS.search(m.name) and m.identity != a.identity):
                continue
            if not any(k.ok and k.identity == a.identity for k in steps[j + 1 :]) or not a.domain:
                break
            name = quoted_name(m.name, 60)
            text = (
                f"An overlay on this site intercepts clicks until its {m.role} {name} is clicked: "
                f"click {m.role} {name} first."
            )
            lid = lesson_id_for(None, None, a.domain, text)
            if lid not in seen:
                seen.add(lid)
                out.append(
                    (
                        a.domain,
                        a.step,
                        LessonRecorded(
                            lesson_id=lid,
                            lesson=text,
                            category="site_specific",
                            scope_domain=a.domain,
                            learned_from=[x for x in (a.event_id, m.event_id) if x],
                        ),
                    )
                )
            break
    return out


def effective_steps(steps: Sequence[StepRecord]) -> list[StepRecord]:
    """The ok steps worth replaying: failures dropped, and so are recoveries that did not help
    (an ok step right after a failure, followed by the same failed action failing again)."""
    kept: list[StepRecord] = []
    for i, s in enumerate(steps):
        if not s.ok or s.command == "finish":
            continue
        prev = steps[i - 1] if i > 0 else None
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if (
            prev is not None
            and not prev.ok
            and nxt is not None
            and not nxt.ok
            and nxt.command == prev.command
            and nxt.identity == prev.identity
        ):
            continue
        kept.append(s)
    return kept


def observe_facts(steps: Sequence[StepRecord], success: bool) -> list[tuple[str, FactObserved]]:
    """App knowledge seen in this run: overlays, fields where fill fails, slow pages, shadow DOM, auth flow."""
    out: dict[tuple[str, str, str], FactObserved] = {}

    def add(domain: str, kind: str, key: str, value: str) -> None:
        if domain:
            out.setdefault(
                (domain, kind, key), FactObserved(fact_type=cast(FactType, kind), key=key[:200], value=value[:300])
            )

    for i, s in enumerate(steps):
        if (
            not s.ok
            and s.command == "fill"
            and "is not an <input>" in (s.error or "")
            and s.name
            and any(k.ok and k.command == "type" for k in steps[i + 1 : i + 4])
        ):
            add(s.domain, "quirk", fill_fails_key(s.name[:80]), "click the field, then type")
        if s.ok and s.command in ("click", "goto") and s.url_after != s.url_before and s.duration_ms > 1000:
            path = url_parts(s.url_after).path or "/"
            add(
                domain_of(s.url_after),
                "timing",
                f"{LOAD_TIME}{path[:80]}",
                f"page load takes about {round(s.duration_ms / 1000)} s",
            )
        if s.ok and s.in_shadow:
            add(s.domain, "quirk", SHADOW_DOM, "uses shadow DOM for modals")
    for i, a in enumerate(steps):
        if not a.ok and "intercepts pointer events" in (a.error or ""):
            m = next(
                (k for k in steps[i + 1 :] if k.ok and k.command == "click" and k.name and DISMISS.search(k.name)), None
            )
            if m is not None:
                add(
                    a.domain,
                    "quirk",
                    "blocking overlay",
                    f"{m.role} {quoted_name(m.name or '', 60)} must be clicked first",
                )
    if success:
        login = [s for s in steps if s.ok and s.command in ("fill", "type", "click")]
        sens = next((k for k, s in enumerate(login) if s.sensitive), None)
        if sens is not None:
            flow = login[max(0, sens - 1) : sens + 2]
            add(
                flow[0].domain,
                "pattern",
                "auth flow",
                " → ".join(f"{s.command} {quoted_name(s.name or '', 40)}" for s in flow),
            )
    return [(k[0], v) for k, v in out.items()]


def grade_steps(steps: Sequence[StepRecord], outcome: RunCompleted) -> list[tuple[int, dict[str, Any]]]:
    """Seed 002's grading by rules: failures carry their correction (what worked instead);
    a recovery that did not help is a failure too; the last step notes an incomplete task."""
    useful = {id(s) for s in effective_steps(steps)}
    grades: list[tuple[int, dict[str, Any]]] = []
    for i, s in enumerate(steps):
        fix = next(
            (
                k
                for k in steps[i + 1 :]
                if k.ok and id(k) in useful and (k.identity != s.identity or k.command != s.command)
            ),
            None,
        )
        correction = _correction(fix) if fix is not None else None
        if not s.ok:
            g = {
                "outcome": "failure",
                "reason": f"failed: {error_pattern(s.error or '')}"[:300],
                "correction": correction,
            }
        elif id(s) not in useful and s.command != "finish":
            g = {
                "outcome": "failure",
                "reason": "did not clear the obstacle; the next attempt failed the same way",
                "correction": correction,
            }
        else:
            moved = s.url_after != s.url_before
            g = {
                "outcome": "success",
                "reason": f"worked: navigated to {url_parts(s.url_after).path or '/'}" if moved else "worked",
                "correction": None,
            }
        if i == len(steps) - 1 and not outcome.success:
            g["task_incomplete"] = (outcome.reason or outcome.summary or "task not completed")[:300]
        grades.append((s.step, g))
    return grades


def _correction(s: StepRecord) -> str:
    if s.command == "press":
        return f"press {s.args.get('key', '')}" + (f" on {s.role} {quoted_name(s.name or '', 40)}" if s.role else "")
    if s.role:
        return f"{s.command} {s.role} {quoted_name(s.name or '', 40)}"
    return s.command


def selector_outcomes(steps: Sequence[StepRecord]) -> list[tuple[type[Payload], dict[str, Any], int, str]]:
    """Each located step's selector, as it worked or failed: (event type, fields, step, domain).
    A step the approval hook rejected was never executed, so it tells nothing of its selector."""
    out: list[tuple[type[Payload], dict[str, Any], int, str]] = []
    for s in steps:
        if not s.selector or not s.role or s.decided_by == "approval":
            continue
        if s.ok:
            fields = {"role": s.role, "name": s.name or "", "selector": s.selector, "url": s.url_before}
            out.append((SelectorSucceeded, fields, s.step, s.domain))
        else:
            fields = {
                "role": s.role,
                "name": s.name or "",
                "selector": s.selector,
                "url": s.url_before,
                "error": (s.error or "")[:300],
            }
            out.append((SelectorFailed, fields, s.step, s.domain))
    return out


def trajectory_of(
    run_id: str, goal: str, start_url: str, steps: Sequence[StepRecord], outcome: RunCompleted
) -> TrajectoryRecorded | None:
    """The reference trajectory of a successful run: its effective steps (sensitive arguments masked,
    refs dropped) and a closing `finish`; `goal` is the run's as memory stores it (secrets scrubbed)."""
    kept = effective_steps(steps)
    if not kept:
        return None
    tsteps = []
    for s in kept:
        args = {k: v for k, v in s.args.items() if k != "ref"}
        if s.sensitive:
            args = masked_args(args)
        effect = f"url:{s.url_after}" if s.url_after and s.url_after != s.url_before else None
        tsteps.append(
            TrajectoryStep(
                command=s.command,
                args=args,
                role=s.role,
                name=s.name,
                selector=s.selector,
                url=s.url_before,
                verified=s.ok,
                effect=effect,
                duration_ms=round(s.duration_ms, 3),
            )
        )
    tsteps.append(TrajectoryStep(command="finish", args={"result": "done"}, url=outcome.final_url or "", verified=True))
    return TrajectoryRecorded(
        trajectory_id=f"traj_{run_id}",
        goal=goal,
        origin=origin_of(start_url),
        steps=tsteps,
        success=True,
        duration_ms=round(outcome.duration_ms, 3),
        turns=outcome.turns,
    )


def learn_from(
    steps: Sequence[StepRecord],
    outcome: RunCompleted,
    learned: Learned,
    patterns_used: Sequence[str],
    *,
    run_id: str,
    goal: str,
    start_url: str,
) -> list[tuple[type[Payload], dict[str, Any], int | None, str | None]]:
    """What a finished run teaches, as (event type, fields, step, domain) in the order they are
    recorded: the patterns of a success (but those it followed), lessons, facts, selector outcomes
    and the trajectory of a success; each is also put into `learned` for the caller."""
    run_domain = domain_of(start_url)
    out: list[tuple[type[Payload], dict[str, Any], int | None, str | None]] = []
    if outcome.success:
        for pattern in learn_patterns(steps, run_domain):
            if pattern.pattern_id not in patterns_used:
                learned.patterns.append(pattern)
                out.append((PatternLearned, pattern.model_dump(), None, run_domain))
    for domain, step, payload in extract_lessons(steps):
        learned.lessons.append(payload)
        out.append((LessonRecorded, payload.model_dump(), step, domain))
    for domain, fact in observe_facts(steps, outcome.success):
        learned.facts.append(fact)
        out.append((FactObserved, fact.model_dump(), None, domain))
    out += selector_outcomes(steps)
    if outcome.success:
        traj = trajectory_of(run_id, goal, start_url, steps, outcome)
        if traj is not None:
            learned.trajectory = traj
            out.append((TrajectoryRecorded, traj.model_dump(), None, run_domain))
    return out


def finishing(
    steps: Sequence[StepRecord],
    outcome: RunCompleted,
    learned: Learned,
    *,
    learn: bool,
    patterns_used: Sequence[str],
    recalls: Sequence[RecordedEvent],
    run_id: str,
    goal: str,
    safe_goal: str,
    start_url: str,
    session_id: str,
    now: str,
) -> list[tuple[type[Payload], dict[str, Any], int | None, str | None]]:
    """What finishing a run with memory on writes before its run_completed, in order: the uses of
    the patterns it followed and of the lessons its recalls on error offered where the failure then
    cleared (`recalls`: those recalls), what it learned (unless `learn` is False: an exploration), its
    session entry and its graded steps (a baseline run, memory off, writes none of them: they
    would be memory a later run retrieves). `safe_goal` is the goal as memory stores it."""
    run_domain = domain_of(start_url)
    out: list[tuple[type[Payload], dict[str, Any], int | None, str | None]] = [
        (PatternUsed, {"pattern_id": pid, "success": outcome.success}, None, run_domain) for pid in patterns_used
    ]
    if learn:
        out += learn_from(steps, outcome, learned, patterns_used, run_id=run_id, goal=safe_goal, start_url=start_url)
    relearned = {fields.get("lesson_id") for cls, fields, _, _ in out if cls is LessonRecorded}
    out += cleared_recalls(steps, recalls, relearned)
    session = {
        "session_id": session_id,
        "goal": goal,
        "outcome": outcome.summary[:500],
        "success": outcome.success,
        "final_url": outcome.final_url,
        "timestamp": now,
        "turns_used": outcome.turns,
        "duration_ms": round(outcome.duration_ms, 3),
    }
    out.append((SessionRecorded, session, None, run_domain))
    out += [(StepGraded, grade, step, None) for step, grade in grade_steps(steps, outcome)]
    return out
