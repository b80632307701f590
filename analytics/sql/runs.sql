-- Runs: sessions, lineage (resume/fork via parent_run_id and mode), outcomes.

-- name: runs
-- empty: No run was started in this ledger.
-- One row per run: how it started, how (and whether) it ended.
-- show: run_id, status, goal, domain, memory_enabled, turns, tokens_in, duration_ms, started_at
WITH done AS (
    SELECT * FROM run_completed QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
)
SELECT s.run_id, s.session_id, s.parent_run_id, s.mode, s.goal, s.case_id, s.domain,
       s.memory_enabled, s.recorded_at AS started_at, d.recorded_at AS completed_at,
       CASE WHEN d.run_id IS NULL THEN 'running' WHEN d.success THEN 'completed' ELSE 'failed' END AS status,
       d.success, d.turns, d.tokens_in, d.tokens_out, d.duration_ms, d.final_url, s.seq AS started_seq
FROM run_started s LEFT JOIN done d USING (run_id)
ORDER BY s.seq;

-- name: outcomes
-- empty: No run was started in this ledger.
-- Per domain where runs started: how many ran, passed, failed, are still running.
WITH done AS (
    SELECT * FROM run_completed QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
)
SELECT coalesce(s.domain, '-') AS domain, count(*) AS runs,
       count(d.run_id) FILTER (WHERE d.success) AS passed,
       count(d.run_id) FILTER (WHERE NOT d.success) AS failed,
       count(*) FILTER (WHERE d.run_id IS NULL) AS running,
       round(count(d.run_id) FILTER (WHERE d.success) / nullif(count(d.run_id), 0), 4) AS pass_rate,
       round(avg(d.turns), 2) AS avg_turns
FROM run_started s LEFT JOIN done d USING (run_id)
GROUP BY 1 ORDER BY 1;

-- name: lineage
-- empty: No run was resumed or forked.
-- Every resume/fork edge: parent run -> child run, with the lineage root and depth.
WITH RECURSIVE chain(run_id, root_run_id, depth) AS (
    SELECT run_id, run_id, 0 FROM run_started WHERE parent_run_id IS NULL
       OR parent_run_id NOT IN (SELECT run_id FROM run_started)
    UNION ALL
    SELECT c.run_id, chain.root_run_id, chain.depth + 1
    FROM run_started c JOIN chain ON c.parent_run_id = chain.run_id
)
SELECT s.parent_run_id, s.run_id, s.mode, s.session_id, p.session_id AS parent_session_id,
       chain.root_run_id, chain.depth, s.goal
FROM run_started s JOIN chain USING (run_id) LEFT JOIN run_started p ON p.run_id = s.parent_run_id
WHERE s.parent_run_id IS NOT NULL
ORDER BY s.seq;

-- name: sessions
-- empty: No run was given a session id.
-- Runs grouped by session id (seed 000's continuation threads).
WITH done AS (
    SELECT * FROM run_completed QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY seq DESC) = 1
)
SELECT s.session_id, count(*) AS runs, count(d.run_id) FILTER (WHERE d.success) AS passed,
       min(s.recorded_at) AS first_started, max(s.recorded_at) AS last_started,
       list(s.run_id ORDER BY s.seq) AS run_ids
FROM run_started s LEFT JOIN done d USING (run_id)
WHERE s.session_id IS NOT NULL
GROUP BY 1 ORDER BY min(s.seq);
