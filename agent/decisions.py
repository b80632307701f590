"""Recorded decisions, asked again from the ledger alone.

A policy decides from its conversation (`memtape.agent.conversation`), and the ledger holds every
part of it: the system prompt in force and each step prompt (`context_built`, whose items
joined in reading order are the prompt's text) and the policy's own replies (`step_recorded`:
the reasoning as `think`, the call as `action`). So any recorded decision can be put to a
policy again, on its prompts as recorded or with memory items masked (what `memtape credit`
does). The ledger keeps secrets redacted: a re-asked decision's redacted values compare equal
to the recorded ones (`same_call`).

Example:
    for recorded in recorded_decisions(store, run_id):
        again = ScriptedPolicy().decide(recorded.messages)
        assert same_call(again, recorded)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memtape.agent import prompt as P
from memtape.agent.conversation import Message, conversation
from memtape.agent.policy import Decision, DecisionPolicy, ScriptedPolicy
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.redact import MARKER
from memtape.ledger.store import Store
from memtape.projections.budget import BudgetItem

#: how a step was decided when a policy decided it (an approval hook vetoes a policy's decision)
ASKED = ("policy", "approval")


@dataclass(frozen=True)
class RecordedDecision:
    """One decision as the ledger holds it: the conversation it was made on, and the call made."""

    run_id: str
    step: int
    messages: tuple[Message, ...]
    command: str
    args: dict[str, Any] = field(default_factory=dict)
    think: str = ""


def prompt_text(prompt: str, items: Iterable[Mapping[str, Any]]) -> str:
    """A recorded prompt's text from its `context_built` items: the system prompt's in the order
    recorded, a step prompt's in reading order with its footer (as the agent rendered them)."""
    kept = [
        BudgetItem(str(i.get("source")), int(i.get("priority") or 0), str(i.get("text") or ""), "text") for i in items
    ]
    if prompt == "system":
        return "\n\n".join(i.text for i in kept)
    return P.render_step(kept)


def decisions_in(events: Iterable[RecordedEvent]) -> list[RecordedDecision]:
    """Every decision a policy made in `events` (one run's, in order), with its conversation."""
    system = ""
    steps: dict[int, str] = {}
    replies: list[Message] = []
    out: list[RecordedDecision] = []
    for ev in events:
        data = ev.data
        if ev.type == "context_built":
            text = prompt_text(str(data.get("prompt")), data.get("items") or ())
            if data.get("prompt") == "system":
                system = text
            else:
                steps[ev.step or 0] = text
        elif ev.type == "step_recorded" and data.get("decided_by", "policy") in ASKED:
            asked_on = steps.get(ev.step or 0)
            if asked_on is None:  # a step no prompt was recorded for: not a decision on a prompt
                continue
            action = data.get("action") or {}
            reply = Message(
                "assistant", str(data.get("think") or ""), str(action.get("command")), dict(action.get("args") or {})
            )
            out.append(
                RecordedDecision(
                    str(ev.run_id),
                    ev.step or 0,
                    conversation(system, replies, asked_on),
                    reply.command or "",
                    reply.args,
                    reply.content,
                )
            )
            replies.append(reply)
    return out


def recorded_decisions(store: Store, run_id: str) -> list[RecordedDecision]:
    """Every decision a policy made in run `run_id`, with the conversation it was made on."""
    return decisions_in(store.read(run_id=run_id, types=["context_built", "step_recorded"]))


def same_call(decision: Decision, recorded: RecordedDecision) -> bool:
    """Whether a decision makes the recorded call (a value the ledger redacted matches any)."""
    if decision.command != recorded.command:
        return False
    keys = set(decision.args) | set(recorded.args)
    return all(recorded.args.get(k) == MARKER or decision.args.get(k) == recorded.args.get(k) for k in keys)


def ask_again(recorded: RecordedDecision, policy: DecisionPolicy | None = None) -> Decision:
    """The decision `policy` (default: the bundled scripted one) makes on a recorded conversation."""
    return (policy or ScriptedPolicy()).decide(recorded.messages)
