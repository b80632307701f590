-- Recall: hit rate of error recall (trigger A) and domain recall (trigger B), and the
-- lessons never recalled. A hit is a recall event that returned at least one lesson.

-- name: hit_rate
-- empty: No recall happened in this ledger.
WITH r AS (SELECT * FROM recall_events)
SELECT kind, count(*) AS recalls, count(*) FILTER (WHERE n > 0) AS hits,
       round(count(*) FILTER (WHERE n > 0) / nullif(count(*), 0), 4) AS hit_rate,
       sum(n) AS lessons_returned, count(DISTINCT run_id) AS runs
FROM r GROUP BY kind ORDER BY kind DESC;

-- name: by_domain
-- empty: No recall happened in this ledger.
WITH r AS (SELECT * FROM recall_events)
SELECT coalesce(domain, '-') AS domain,
       count(*) FILTER (WHERE kind = 'error') AS error_recalls,
       count(*) FILTER (WHERE kind = 'error' AND n > 0) AS error_hits,
       count(*) FILTER (WHERE kind = 'domain') AS domain_recalls,
       count(*) FILTER (WHERE kind = 'domain' AND n > 0) AS domain_hits,
       round(count(*) FILTER (WHERE n > 0) / nullif(count(*), 0), 4) AS hit_rate
FROM r GROUP BY 1 ORDER BY 1;

-- name: lessons
-- empty: No lesson is alive in this ledger.
-- Every lesson still alive (seeded or recorded, not pruned, not forgotten), with its recall counts.
WITH alive AS (
    SELECT lesson_id, lesson, category, scope_domain, 'seed' AS source, seq FROM lesson_seeded
    UNION ALL
    SELECT lesson_id, lesson, category, scope_domain, source, seq FROM lesson_recorded
), born AS (
    SELECT * FROM alive QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
)
SELECT b.lesson_id, b.lesson, b.category, b.source, b.scope_domain,
       count(h.seq) FILTER (WHERE h.kind = 'error') AS error_recalls,
       count(h.seq) FILTER (WHERE h.kind = 'domain') AS domain_recalls,
       count(DISTINCT h.run_id) AS runs,
       b.lesson_id IN (SELECT lesson_id FROM lessons_pruned WHERE seq > b.seq) AS pruned
FROM born b LEFT JOIN recall_hits h ON h.lesson_id = b.lesson_id AND h.seq > b.seq
GROUP BY ALL ORDER BY min(b.seq);

-- name: never_recalled
-- empty: Every lesson was recalled at least once.
WITH alive AS (
    SELECT lesson_id, lesson, category, scope_domain, 'seed' AS source, seq, recorded_at FROM lesson_seeded
    UNION ALL
    SELECT lesson_id, lesson, category, scope_domain, source, seq, recorded_at FROM lesson_recorded
), born AS (
    SELECT * FROM alive QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
)
SELECT lesson_id, lesson, category, source, scope_domain, recorded_at,
       lesson_id IN (SELECT lesson_id FROM lessons_pruned) AS pruned
FROM born
WHERE lesson_id NOT IN (SELECT lesson_id FROM recall_hits)
ORDER BY seq;
