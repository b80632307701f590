-- Memory effect: turns, tokens, duration and pass rate for the same goals with memory
-- off vs on, and cold (first memory-on run of a goal) vs warm (later ones).
-- A goal is run_started.case_id when set, else the goal text. Only completed runs count.

-- name: summary
-- Conditions compared only over goals that have runs in both conditions of the pair.
WITH done AS (
    SELECT * FROM run_completed QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
), r AS (
    SELECT coalesce(s.case_id, s.goal) AS goal_key, s.memory_enabled, s.seq,
           d.success, d.turns, d.tokens_in + d.tokens_out AS tokens, d.duration_ms
    FROM run_started s JOIN done d USING (run_id)
), c AS (
    SELECT *, CASE WHEN NOT memory_enabled THEN 'off'
                   WHEN row_number() OVER (PARTITION BY goal_key, memory_enabled ORDER BY seq) = 1 THEN 'cold'
                   ELSE 'warm' END AS temp
    FROM r
), labelled AS (
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
-- Per goal and condition (off / cold / warm).
WITH done AS (
    SELECT * FROM run_completed QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
), r AS (
    SELECT coalesce(s.case_id, s.goal) AS goal_key, s.memory_enabled, s.seq,
           d.success, d.turns, d.tokens_in + d.tokens_out AS tokens, d.duration_ms
    FROM run_started s JOIN done d USING (run_id)
), c AS (
    SELECT *, CASE WHEN NOT memory_enabled THEN 'off'
                   WHEN row_number() OVER (PARTITION BY goal_key, memory_enabled ORDER BY seq) = 1 THEN 'cold'
                   ELSE 'warm' END AS condition
    FROM r
)
SELECT goal_key AS goal, condition, count(*) AS runs, round(avg(CAST(success AS INTEGER)), 4) AS pass_rate,
       round(avg(turns), 2) AS avg_turns, round(avg(tokens), 1) AS avg_tokens,
       round(avg(duration_ms), 1) AS avg_duration_ms
FROM c GROUP BY 1, 2
ORDER BY min(seq), CASE condition WHEN 'off' THEN 0 WHEN 'cold' THEN 1 ELSE 2 END;

-- name: runs
-- Every completed run with its goal key and condition.
WITH done AS (
    SELECT * FROM run_completed QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
), r AS (
    SELECT s.run_id, coalesce(s.case_id, s.goal) AS goal_key, s.memory_enabled, s.seq,
           d.success, d.turns, d.tokens_in + d.tokens_out AS tokens, d.duration_ms
    FROM run_started s JOIN done d USING (run_id)
)
SELECT run_id, goal_key AS goal, memory_enabled,
       CASE WHEN NOT memory_enabled THEN 'off'
            WHEN row_number() OVER (PARTITION BY goal_key, memory_enabled ORDER BY seq) = 1 THEN 'cold'
            ELSE 'warm' END AS condition,
       success, turns, tokens, duration_ms, seq AS started_seq
FROM r ORDER BY seq;
