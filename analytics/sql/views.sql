-- Typed views over the analytics mirror (analytics/mirror.py): `events` holds every event as
-- analytics may show it (forgotten subjects already left out or masked, payloads upcast,
-- `lesson_id` filled as the lessons projection fills it), `intervals` the validity intervals of
-- the indexed projections and `short_term_intervals` those of short-term memory (typed). Nothing
-- here re-derives a rule of memory: the rules are Python's.
-- Times: *_at columns are the ledger's text (text order = time order); *_ts are TIMESTAMP (UTC).
-- `events` is stored clustered by type, then seq: ORDER BY seq where the log's order matters.
-- Run on every connection (CREATE OR REPLACE), so the file always holds this version's views.

CREATE OR REPLACE MACRO j(p, k) AS json_extract_string(p, '$.' || k);
CREATE OR REPLACE MACRO jlist(p, k) AS coalesce(json_extract_string(p, '$.' || k || '[*]'), []::VARCHAR[]);

CREATE OR REPLACE VIEW ev AS SELECT * FROM events;

-- What the agent knew at step k of run r: every version of every indexed projection's items
-- (lessons, knowledge, sessions, selectors, trajectories, runs, step_memories, short_term) valid at
-- the seq `memtape audit` reads the step's memory at (the table step_as_of, filled by its Python
-- rule: just before the step's first step_recorded, else its last prompt). `item` is the key of the
-- item in its projection's field (a lesson id, a domain, a run id...), `part` the inner key of a
-- two-level field (a fact key, a trajectory id), `value` the item as JSON. Short-term (working)
-- memory is stored typed in short_term_intervals and turned back into the same JSON here (field
-- `by_run`, one item per run: `item = run_id` is the step's own run, its recent actions, failure
-- signatures, loop warnings and navigation path as they stood before the step). Versions closed
-- before the latest forget are not kept (they may hold the subject): for a step before it, only
-- the versions that outlived the forget are here (`memtape audit` folds the log).
CREATE OR REPLACE VIEW memory_at_step AS
SELECT s.run_id, s.step, s.as_of_seq, i.projection, i.field, i.item, i.part, i.valid_from, i.valid_to, i.value
FROM step_as_of s JOIN intervals i
  ON i.valid_from <= s.as_of_seq AND s.as_of_seq < coalesce(i.valid_to, 9223372036854775807)
UNION ALL
SELECT s.run_id, s.step, s.as_of_seq, 'short_term', 'by_run', t.run_id, NULL, t.valid_from, t.valid_to,
       CAST(to_json(t.value) AS JSON)
FROM step_as_of s JOIN short_term_intervals t
  ON t.valid_from <= s.as_of_seq AND s.as_of_seq < coalesce(t.valid_to, 9223372036854775807);

CREATE OR REPLACE VIEW run_started AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       j(payload, 'session_id') AS session_id, j(payload, 'parent_run_id') AS parent_run_id,
       j(payload, 'mode') AS mode, j(payload, 'goal') AS goal, j(payload, 'start_url') AS start_url,
       coalesce(CAST(j(payload, 'memory_enabled') AS BOOLEAN), true) AS memory_enabled,
       j(payload, 'isolation') AS isolation, j(payload, 'case_id') AS case_id
FROM ev WHERE type = 'run_started';

CREATE OR REPLACE VIEW run_completed AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       CAST(j(payload, 'success') AS BOOLEAN) AS success, j(payload, 'summary') AS summary,
       j(payload, 'result') AS result, j(payload, 'reason') AS reason, j(payload, 'final_url') AS final_url,
       TRY_CAST(j(payload, 'turns') AS BIGINT) AS turns,
       TRY_CAST(j(payload, 'tokens_in') AS BIGINT) AS tokens_in, TRY_CAST(j(payload, 'tokens_out') AS BIGINT) AS tokens_out,
       CAST(j(payload, 'duration_ms') AS DOUBLE) AS duration_ms,
       TRY_CAST(j(payload, 'policy_decisions') AS BIGINT) AS policy_decisions,
       TRY_CAST(j(payload, 'replayed_steps') AS BIGINT) AS replayed_steps,
       CAST(j(payload, 'memory_ms') AS DOUBLE) AS memory_ms
FROM ev WHERE type = 'run_completed';

CREATE OR REPLACE VIEW run_progress AS
SELECT seq, id, run_id, step, domain, recorded_at, recorded_ts,
       TRY_CAST(j(payload, 'turn') AS BIGINT) AS turn, j(payload, 'current_url') AS current_url
FROM ev WHERE type = 'run_progress';

CREATE OR REPLACE VIEW session_recorded AS
SELECT seq, id, run_id, domain, recorded_at, occurred_at,
       j(payload, 'session_id') AS session_id, j(payload, 'goal') AS goal, j(payload, 'outcome') AS outcome,
       CAST(j(payload, 'success') AS BOOLEAN) AS success, j(payload, 'final_url') AS final_url,
       j(payload, 'timestamp') AS timestamp, TRY_CAST(j(payload, 'turns_used') AS BIGINT) AS turns_used,
       CAST(j(payload, 'duration_ms') AS DOUBLE) AS duration_ms
FROM ev WHERE type = 'session_recorded';

CREATE OR REPLACE VIEW step_recorded AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       j(payload, 'action.command') AS command, json_extract(payload, '$.action.args') AS args,
       CAST(j(payload, 'ok') AS BOOLEAN) AS ok, j(payload, 'error') AS error,
       j(payload, 'target_text') AS target_text,
       j(payload, 'env_before.url') AS url_before, j(payload, 'env_after.url') AS url_after,
       CAST(j(payload, 'duration_ms') AS DOUBLE) AS duration_ms,
       CAST(j(payload, 'memory_ms') AS DOUBLE) AS memory_ms,
       j(payload, 'decided_by') AS decided_by, TRY_CAST(j(payload, 'rep') AS BIGINT) AS rep
FROM ev WHERE type = 'step_recorded';

CREATE OR REPLACE VIEW step_graded AS
SELECT seq, id, run_id, step, domain, recorded_at,
       j(payload, 'outcome') AS outcome, j(payload, 'reason') AS reason,
       j(payload, 'correction') AS correction, j(payload, 'grader') AS grader
FROM ev WHERE type = 'step_graded';

CREATE OR REPLACE VIEW tier1_loaded AS
SELECT seq, id, run_id, step, domain, recorded_at,
       TRY_CAST(j(payload, 'count') AS BIGINT) AS count, jlist(payload, 'lesson_ids') AS lesson_ids
FROM ev WHERE type = 'tier1_loaded';

CREATE OR REPLACE VIEW error_recall AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at,
       j(payload, 'command') AS command, j(payload, 'error_snippet') AS error_snippet,
       TRY_CAST(j(payload, 'matched') AS BIGINT) AS matched, jlist(payload, 'lesson_ids') AS lesson_ids
FROM ev WHERE type = 'error_recall';

CREATE OR REPLACE VIEW domain_recall AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at,
       TRY_CAST(j(payload, 'matched') AS BIGINT) AS matched, jlist(payload, 'lesson_ids') AS lesson_ids
FROM ev WHERE type = 'domain_recall';

-- one row per (recall event, lesson it returned)
CREATE OR REPLACE VIEW recall_hits AS
SELECT r.seq, r.run_id, r.step, r.domain, r.recorded_at, r.kind, u.lesson_id
FROM (SELECT seq, run_id, step, domain, recorded_at, 'error' AS kind, lesson_ids FROM error_recall
      UNION ALL
      SELECT seq, run_id, step, domain, recorded_at, 'domain' AS kind, lesson_ids FROM domain_recall) r,
     unnest(r.lesson_ids) AS u(lesson_id);

-- one row per recall event; n = lessons it returned (`matched` when the event names no lesson ids)
CREATE OR REPLACE VIEW recall_events AS
SELECT r.seq, r.run_id, r.step, r.domain, r.recorded_at, r.kind,
       CASE WHEN len(r.lesson_ids) = 0 THEN r.matched ELSE len(r.lesson_ids) END AS n
FROM (SELECT seq, run_id, step, domain, recorded_at, 'error' AS kind, matched, lesson_ids FROM error_recall
      UNION ALL
      SELECT seq, run_id, step, domain, recorded_at, 'domain' AS kind, matched, lesson_ids FROM domain_recall) r;

CREATE OR REPLACE VIEW trajectory_recalled AS
SELECT seq, id, run_id, step, domain, recorded_at,
       j(payload, 'goal') AS goal, j(payload, 'trajectory_id') AS trajectory_id,
       j(payload, 'matched_goal') AS matched_goal, CAST(j(payload, 'similarity') AS DOUBLE) AS similarity,
       CAST(j(payload, 'score') AS DOUBLE) AS score, TRY_CAST(j(payload, 'steps') AS BIGINT) AS steps,
       CAST(j(payload, 'replay') AS BOOLEAN) AS replay
FROM ev WHERE type = 'trajectory_recalled';

CREATE OR REPLACE VIEW context_built AS
SELECT seq, id, run_id, step, domain, recorded_at,
       j(payload, 'prompt') AS prompt, TRY_CAST(j(payload, 'budget') AS BIGINT) AS budget,
       TRY_CAST(j(payload, 'total_tokens') AS BIGINT) AS total_tokens,
       CAST(json_array_length(payload, '$.items') AS INTEGER) AS n_items,
       CAST(json_array_length(payload, '$.trimmed') AS INTEGER) AS n_trimmed
FROM ev WHERE type = 'context_built';

CREATE OR REPLACE VIEW lesson_seeded AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       lesson_id, j(payload, 'lesson') AS lesson, j(payload, 'category') AS category,
       j(payload, 'failed_command') AS failed_command, j(payload, 'error_pattern') AS error_pattern,
       j(payload, 'scope_domain') AS scope_domain
FROM ev WHERE type = 'lesson_seeded';

CREATE OR REPLACE VIEW lesson_recorded AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       lesson_id, j(payload, 'lesson') AS lesson, j(payload, 'category') AS category,
       j(payload, 'failed_command') AS failed_command, j(payload, 'error_pattern') AS error_pattern,
       j(payload, 'scope_domain') AS scope_domain,
       coalesce(j(payload, 'source'), 'learned') AS source,
       coalesce(TRY_CAST(j(payload, 'use_count') AS BIGINT), 1) AS use_count,
       jlist(payload, 'triggered_domains') AS triggered_domains
FROM ev WHERE type = 'lesson_recorded';

CREATE OR REPLACE VIEW lesson_deduplicated AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       lesson_id, j(payload, 'lesson') AS lesson, j(payload, 'category') AS category,
       j(payload, 'scope_domain') AS scope_domain, TRY_CAST(j(payload, 'new_use_count') AS BIGINT) AS new_use_count
FROM ev WHERE type = 'lesson_deduplicated';

CREATE OR REPLACE VIEW lesson_promoted AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       lesson_id, j(payload, 'lesson') AS lesson,
       TRY_CAST(j(payload, 'use_count') AS BIGINT) AS use_count,
       jlist(payload, 'triggered_domains') AS triggered_domains,
       j(payload, 'from_category') AS from_category, j(payload, 'to_category') AS to_category
FROM ev WHERE type = 'lesson_promoted';

CREATE OR REPLACE VIEW lessons_pruned AS
SELECT seq, id, run_id, recorded_at, occurred_at, u.lesson_id,
       TRY_CAST(j(payload, 'pruned_count') AS BIGINT) AS pruned_count,
       TRY_CAST(j(payload, 'remaining_count') AS BIGINT) AS remaining_count, j(payload, 'as_of') AS as_of
FROM ev, unnest(jlist(payload, 'lesson_ids')) AS u(lesson_id)
WHERE type = 'lessons_pruned';

CREATE OR REPLACE VIEW fact_observed AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       j(payload, 'fact_type') AS fact_type, j(payload, 'key') AS key, j(payload, 'value') AS value,
       CAST(j(payload, 'confidence') AS DOUBLE) AS confidence, TRY_CAST(j(payload, 'sources') AS BIGINT) AS sources
FROM ev WHERE type = 'fact_observed';

CREATE OR REPLACE VIEW fact_contradicted AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       j(payload, 'fact_type') AS fact_type, j(payload, 'key') AS key,
       jlist(payload, 'old_values') AS old_values, j(payload, 'new_value') AS new_value,
       CAST(j(payload, 'factor') AS DOUBLE) AS factor
FROM ev WHERE type = 'fact_contradicted';

CREATE OR REPLACE VIEW facts_pruned AS
SELECT e.seq, e.id, e.run_id, e.domain, e.recorded_at, e.occurred_at, e.recorded_ts,
       j(f.value, 'fact_type') AS fact_type, j(f.value, 'key') AS key, j(f.value, 'value') AS value,
       CAST(j(f.value, 'confidence') AS DOUBLE) AS confidence,
       coalesce(j(f.value, 'domain'), e.domain) AS fact_domain,
       CAST(j(e.payload, 'threshold') AS DOUBLE) AS threshold
FROM ev AS e, json_each(e.payload, '$.facts') AS f
WHERE e.type = 'facts_pruned';

CREATE OR REPLACE VIEW selector_outcome AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at,
       type = 'selector_succeeded' AS succeeded,
       j(payload, 'role') AS role, j(payload, 'name') AS name, j(payload, 'selector') AS selector,
       j(payload, 'url') AS url, j(payload, 'healed_from') AS healed_from, j(payload, 'error') AS error
FROM ev WHERE type IN ('selector_succeeded', 'selector_failed');

CREATE OR REPLACE VIEW trajectory_recorded AS
SELECT seq, id, run_id, step, domain, recorded_at, occurred_at, recorded_ts, occurred_ts,
       j(payload, 'trajectory_id') AS trajectory_id, j(payload, 'goal') AS goal, j(payload, 'origin') AS origin,
       CAST(json_array_length(payload, '$.steps') AS INTEGER) AS n_steps,
       CAST(j(payload, 'success') AS BOOLEAN) AS success, CAST(j(payload, 'duration_ms') AS DOUBLE) AS duration_ms,
       TRY_CAST(j(payload, 'turns') AS BIGINT) AS turns
FROM ev WHERE type = 'trajectory_recorded';

CREATE OR REPLACE VIEW trajectories_expired AS
SELECT seq, id, recorded_at, occurred_at, u.trajectory_id,
       CAST(j(payload, 'ttl_days') AS DOUBLE) AS ttl_days, j(payload, 'as_of') AS as_of
FROM ev, unnest(jlist(payload, 'trajectory_ids')) AS u(trajectory_id)
WHERE type = 'trajectories_expired';

CREATE OR REPLACE VIEW memory_imported AS
SELECT seq, id, recorded_at, j(payload, 'source_format') AS source_format,
       j(payload, 'source_path') AS source_path, j(payload, 'source_digest') AS source_digest
FROM ev WHERE type = 'memory_imported';

-- Completed runs by goal (run_started.case_id when set, else the goal text) and condition:
-- off (memory disabled), cold (the first memory-on run of the goal), warm (later ones).
CREATE OR REPLACE VIEW goal_runs AS
WITH done AS (
    SELECT * FROM run_completed QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
), r AS (
    SELECT s.run_id, coalesce(s.case_id, s.goal) AS goal_key, s.memory_enabled, s.seq,
           d.success, d.turns, CAST(d.tokens_in AS HUGEINT) + d.tokens_out AS tokens, d.duration_ms
    FROM run_started s JOIN done d USING (run_id)
)
SELECT *, CASE WHEN NOT memory_enabled THEN 'off'
               WHEN row_number() OVER (PARTITION BY goal_key, memory_enabled ORDER BY seq) = 1 THEN 'cold'
               ELSE 'warm' END AS condition
FROM r;

-- What `memtape credit` measured of each memory item on each run: the latest credit of each
-- (item, run) pair (a later one replaces an earlier).
CREATE OR REPLACE VIEW item_credited AS
SELECT seq, id, domain, recorded_at, occurred_at, j(payload, 'item') AS item, j(payload, 'kind') AS kind,
       j(payload, 'text') AS text, j(payload, 'credited_run') AS credited_run, j(payload, 'method') AS method,
       TRY_CAST(j(payload, 'shown') AS BIGINT) AS shown, TRY_CAST(j(payload, 'changed') AS BIGINT) AS changed,
       TRY_CAST(j(payload, 'turns_saved') AS BIGINT) AS turns_saved,
       TRY_CAST(j(payload, 'tokens_saved') AS BIGINT) AS tokens_saved,
       coalesce(TRY_CAST(j(payload, 'success_saved') AS BIGINT), 0) AS success_saved
FROM ev WHERE type = 'item_credited'
QUALIFY row_number() OVER (PARTITION BY j(payload, 'item'), j(payload, 'credited_run') ORDER BY seq DESC) = 1;
