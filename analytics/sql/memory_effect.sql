-- Memory effect: turns, tokens, duration and pass rate for the same goals with memory
-- off vs on, and cold (first memory-on run of a goal) vs warm (later ones).
-- A goal is run_started.case_id when set, else the goal text. Only completed runs count
-- (the view goal_runs in views.sql).

-- name: summary
-- empty: No goal was run both with memory off and on (or cold and warm).
-- Conditions compared only over goals that have runs in both conditions of the pair.
WITH c AS (SELECT * EXCLUDE (condition), condition AS temp FROM goal_runs), labelled AS (
    SELECT 'off vs on' AS comparison, CASE WHEN memory_enabled THEN 'on' ELSE 'off' END AS condition, *
    FROM c WHERE goal_key IN (SELECT goal_key FROM c GROUP BY 1 HAVING bool_or(memory_enabled) AND bool_or(NOT memory_enabled))
    UNION ALL
    SELECT 'cold vs warm', temp, *
    FROM c WHERE memory_enabled
      AND goal_key IN (SELECT goal_key FROM c WHERE memory_enabled GROUP BY 1 HAVING count(*) >= 2)
)
SELECT comparison, condition, count(DISTINCT goal_key) AS goals, count(*) AS runs,
       round(avg(CAST(success AS INTEGER)), 4) AS pass_rate, round(avg(turns), 2) AS avg_turns,
       round(avg(tokens), 1) AS avg_tokens, round(avg(duration_ms), 1) AS avg_duration_ms
FROM labelled GROUP BY 1, 2
ORDER BY 1 DESC, CASE condition WHEN 'off' THEN 0 WHEN 'on' THEN 1 WHEN 'cold' THEN 2 ELSE 3 END;

-- name: by_goal
-- empty: No run has completed in this ledger.
-- Per goal and condition (off / cold / warm).
WITH c AS (SELECT * FROM goal_runs)
SELECT goal_key AS goal, condition, count(*) AS runs, round(avg(CAST(success AS INTEGER)), 4) AS pass_rate,
       round(avg(turns), 2) AS avg_turns, round(avg(tokens), 1) AS avg_tokens,
       round(avg(duration_ms), 1) AS avg_duration_ms
FROM c GROUP BY 1, 2
ORDER BY min(seq), CASE condition WHEN 'off' THEN 0 WHEN 'cold' THEN 1 ELSE 2 END;

-- name: runs
-- empty: No run has completed in this ledger.
-- Every completed run with its goal key and condition.
SELECT run_id, goal_key AS goal, memory_enabled, condition, success, turns, tokens, duration_ms, seq AS started_seq
FROM goal_runs ORDER BY seq;

-- name: memory_by_source
-- empty: No prompt of a completed run carried memory (no context_built item names the events it came from).
-- Memory tokens the model calls read, by condition and prompt source: an item naming the events it came
-- from counts whole, a system prompt's memory once per call. used_share: the part in sections a decision
-- used (its recorded reason names the item). Rules: analytics/memory_use.py.
WITH r AS (SELECT g.condition, m.* FROM memory_reads m JOIN goal_runs g USING (run_id))
SELECT condition, source, count(*) AS reads, sum(tokens) AS tokens,
       coalesce(sum(tokens) FILTER (WHERE used), 0) AS used_tokens,
       round(coalesce(sum(tokens) FILTER (WHERE used), 0) / nullif(sum(tokens), 0), 4) AS used_share
FROM r GROUP BY 1, 2
ORDER BY CASE condition WHEN 'off' THEN 0 WHEN 'cold' THEN 1 ELSE 2 END, tokens DESC, source;

-- name: memory_decisions
-- empty: No completed run recorded a decided step.
-- Per condition: decisions (steps a policy decided, or replayed from a recorded trajectory), those that
-- used memory (named an item of their prompt, or replayed), the memory tokens the calls read, and the
-- share of them in sections a decision used.
WITH d AS (
    SELECT g.condition, count(*) AS decisions, count(*) FILTER (WHERE m.decided_by = 'replay') AS replayed,
           count(*) FILTER (WHERE m.used_memory) AS using_memory
    FROM memory_decisions m JOIN goal_runs g USING (run_id) GROUP BY 1
), t AS (
    SELECT g.condition, sum(m.tokens) AS memory_tokens, sum(m.tokens) FILTER (WHERE m.used) AS used_tokens
    FROM memory_reads m JOIN goal_runs g USING (run_id) GROUP BY 1
)
SELECT condition, decisions, replayed, using_memory AS decisions_using_memory,
       round(using_memory / decisions, 4) AS share_using_memory, coalesce(memory_tokens, 0) AS memory_tokens,
       coalesce(used_tokens, 0) AS used_memory_tokens, round(used_tokens / nullif(memory_tokens, 0), 4) AS used_share
FROM d LEFT JOIN t USING (condition)
ORDER BY CASE condition WHEN 'off' THEN 0 WHEN 'cold' THEN 1 ELSE 2 END;
