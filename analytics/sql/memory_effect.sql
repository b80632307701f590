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
