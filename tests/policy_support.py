"""A decision's conversation built as the bundled agent builds it: the system prompt with its
memory sections, the policy's earlier replies, the step prompt with the page and the last error."""

from __future__ import annotations

from collections.abc import Sequence

from memtape.agent import prompt as P
from memtape.agent.browser import Observation
from memtape.agent.conversation import Message, conversation
from memtape.projections.budget import BudgetItem


def asked(
    goal: str,
    page: Observation,
    *,
    tier1: Sequence[str] = (),
    domain_tips: Sequence[str] = (),
    sections: Sequence[BudgetItem] = (),
    error: str | None = None,
    error_tips: Sequence[str] = (),
    replies: Sequence[Message] = (),
    recent: Sequence[str] = (),
    step_items: Sequence[BudgetItem] = (),
) -> tuple[Message, ...]:
    """The messages of one decision on `page` (memory sections only where given)."""
    memory = [*([P.domain_tips(domain_tips)] if domain_tips else []), *sections]
    system = P.system_instruction(goal, tier1, memory)
    items = [P.page_state(page.url, page.title, page.page_type, page.summary, page.elements, page.text)]
    if error is not None:
        items.append(P.last_error(error, error_tips))
    if recent:
        items.append(P.recent_actions(recent))
    return conversation(system, replies, P.render_step([*items, *step_items]))
