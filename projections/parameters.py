"""The memory's parameters: every threshold its rules apply, as one policy: `Thresholds` (the defaults are
the seed documents' values). `decisions.py` applies them; projections.db rebuilds when they change.

Not to be confused with the bundled agent's decision policies (`agent/policy.py`: who picks the
next browser action).
"""

from __future__ import annotations

import hashlib
from typing import Annotated

import orjson
from pydantic import BaseModel, ConfigDict, Field

#: bounds of the policy's counts and day spans (a century of days keeps every date in range)
MAX_COUNT = 1_000_000_000
MAX_DAYS = 36_500


class Thresholds(BaseModel):
    """Every threshold the memory applies; the defaults are the seed documents' values."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    #: each threshold in the range where its rule means something (and its arithmetic cannot
    #: overflow a date or a 64-bit count): `experiment --set` and the library refuse the rest
    promotion_min_uses: Annotated[
        int, Field(ge=1, le=MAX_COUNT, description="uses before a lesson can be promoted to Tier 1")
    ] = 5
    promotion_min_domains: Annotated[
        int, Field(ge=0, le=MAX_COUNT, description="distinct domains a lesson must have helped on")
    ] = 3
    tier1_cap: Annotated[
        int, Field(ge=0, le=MAX_COUNT, description="most Tier 1 lessons loaded into the system prompt")
    ] = 10
    recall_top_k: Annotated[int, Field(ge=0, le=MAX_COUNT, description="lessons returned by a recall")] = 3
    prune_max_age_days: Annotated[
        float, Field(ge=0, le=MAX_DAYS, description="a learned lesson unused this long may be pruned")
    ] = 90
    prune_min_uses: Annotated[
        int, Field(ge=0, le=MAX_COUNT, description="lessons used this often are never pruned")
    ] = 5
    fact_initial_confidence: Annotated[float, Field(gt=0, le=1, description="confidence of a newly observed fact")] = (
        0.6
    )
    fact_confirm_rate: Annotated[float, Field(ge=0, le=1, description="share of the gap to 1 a confirmation adds")] = (
        0.2
    )
    fact_decay: Annotated[float, Field(gt=0, le=1, description="factor applied to facts a new value contradicts")] = 0.5
    fact_prune_below: Annotated[float, Field(ge=0, le=1, description="facts below this confidence are pruned")] = 0.1
    fact_prompt_min: Annotated[
        float, Field(ge=0, le=1, description="facts at or above this confidence reach prompts")
    ] = 0.5
    trajectory_min_similarity: Annotated[
        float, Field(ge=0, le=1, description="goal similarity for a reference trajectory")
    ] = 0.5
    trace_ttl_days: Annotated[float, Field(ge=0, le=MAX_DAYS, description="trajectories older than this expire")] = 30
    trace_scoring: Annotated[
        bool, Field(description="rank trajectories by similarity, recency, speed, verification")
    ] = False
    trace_recency_days: Annotated[float, Field(gt=0, le=MAX_DAYS, description="time scale of the recency score")] = 14
    replay_min_similarity: Annotated[
        float, Field(ge=0, le=1, description="goal similarity to replay without the model")
    ] = 0.85
    session_history: Annotated[int, Field(ge=0, le=MAX_COUNT, description="completed runs kept per domain")] = 5
    session_full_detail: Annotated[
        int, Field(ge=0, le=MAX_COUNT, description="newest sessions shown in full in prompts")
    ] = 2
    step_memory_min_similarity: Annotated[
        float, Field(ge=0, le=1, description="page and intent similarity for a graded step to match")
    ] = 0.65
    step_memory_top: Annotated[
        int, Field(ge=0, le=MAX_COUNT, description="best-matching graded steps deduplicated by action")
    ] = 10
    step_memory_count: Annotated[int, Field(ge=0, le=MAX_COUNT, description="graded steps offered per prompt")] = 2
    loop_threshold: Annotated[
        int, Field(ge=1, le=MAX_COUNT, description="repeats of one action that raise a loop warning")
    ] = 3
    loop_window: Annotated[int, Field(ge=1, le=MAX_COUNT, description="recent steps searched for repeats")] = 10
    max_patterns: Annotated[
        int, Field(ge=1, le=MAX_COUNT, description="learned patterns kept before the bottom 20% are pruned")
    ] = 100
    #: switches for ablations (`memtape run --set replay=false`, bench/memory_ablation.py)
    seed_lessons: Annotated[bool, Field(description="the seed lessons reach prompts (Tier 1, recalls)")] = True
    learned_patterns: Annotated[bool, Field(description="learned patterns reach prompts")] = True
    replay: Annotated[bool, Field(description="a close trajectory is replayed without the model")] = True
    extraction_ttl_seconds: Annotated[
        float, Field(ge=0, le=MAX_DAYS * 86_400, description="a repeated extraction this recent is served from memory")
    ] = 300

    def fingerprint(self) -> str:
        """A stable digest of every field: projections.db rebuilds when it changes."""
        body = orjson.dumps(self.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(body).hexdigest()[:16]


DEFAULT_POLICY = Thresholds()
