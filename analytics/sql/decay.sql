-- Decay: confidence of facts over time, contradictions, pruning.
-- The confidence walk repeats the knowledge fold (projections/knowledge.py) in SQL:
-- a new fact starts at the observed confidence or $initial; re-observing it while current
-- confirms it (c + $rate * (1 - c)); a contradiction multiplies it by its factor; a prune
-- closes it (a later observation starts it afresh).

-- name: facts
WITH RECURSIVE fe AS (
    SELECT seq, occurred_at, coalesce(domain, '') AS domain, fact_type, key, value, 'observed' AS kind, confidence AS x
    FROM fact_observed
    UNION ALL
    SELECT c.seq, c.occurred_at, coalesce(c.domain, ''), c.fact_type, c.key, v.value, 'contradicted', c.factor
    FROM fact_contradicted c, unnest(c.old_values) AS v(value) WHERE v.value <> c.new_value
    UNION ALL
    SELECT seq, occurred_at, coalesce(fact_domain, ''), fact_type, key, value, 'pruned', NULL FROM facts_pruned
), n AS (
    SELECT *, row_number() OVER (PARTITION BY domain, fact_type, key, value ORDER BY seq) AS i FROM fe
), walk(domain, fact_type, key, value, i, seq, occurred_at, kind, confidence, alive) AS (
    SELECT domain, fact_type, key, value, i, seq, occurred_at, kind,
           CASE WHEN kind = 'observed' THEN coalesce(x, $initial) END, kind = 'observed'
    FROM n WHERE i = 1
    UNION ALL
    SELECT n.domain, n.fact_type, n.key, n.value, n.i, n.seq, n.occurred_at,
           CASE WHEN n.kind = 'observed' AND w.alive THEN 'confirmed' ELSE n.kind END,
           CASE WHEN n.kind = 'observed' THEN
                    CASE WHEN w.alive THEN w.confidence + $rate * (1 - w.confidence) ELSE coalesce(n.x, $initial) END
                WHEN n.kind = 'contradicted' AND w.alive THEN w.confidence * n.x
                ELSE w.confidence END,
           CASE WHEN n.kind = 'observed' THEN true WHEN n.kind = 'pruned' THEN false ELSE w.alive END
    FROM walk w JOIN n ON n.domain = w.domain AND n.fact_type = w.fact_type AND n.key = w.key
                       AND n.value = w.value AND n.i = w.i + 1
)
SELECT domain, fact_type, key, value,
       count(*) FILTER (WHERE kind = 'observed') AS observed,
       count(*) FILTER (WHERE kind = 'confirmed') AS confirmed,
       count(*) FILTER (WHERE kind = 'contradicted') AS contradicted,
       count(*) FILTER (WHERE kind = 'pruned') AS pruned,
       min(occurred_at) AS first_seen, max(occurred_at) AS last_event_at,
       arg_max(confidence, i) AS confidence,
       CASE WHEN arg_max(alive, i) THEN 'current' ELSE 'closed' END AS status
FROM walk GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, min(seq);

-- name: timeline
WITH RECURSIVE fe AS (
    SELECT seq, occurred_at, coalesce(domain, '') AS domain, fact_type, key, value, 'observed' AS kind, confidence AS x
    FROM fact_observed
    UNION ALL
    SELECT c.seq, c.occurred_at, coalesce(c.domain, ''), c.fact_type, c.key, v.value, 'contradicted', c.factor
    FROM fact_contradicted c, unnest(c.old_values) AS v(value) WHERE v.value <> c.new_value
    UNION ALL
    SELECT seq, occurred_at, coalesce(fact_domain, ''), fact_type, key, value, 'pruned', NULL FROM facts_pruned
), n AS (
    SELECT *, row_number() OVER (PARTITION BY domain, fact_type, key, value ORDER BY seq) AS i FROM fe
), walk(domain, fact_type, key, value, i, seq, occurred_at, kind, confidence, alive) AS (
    SELECT domain, fact_type, key, value, i, seq, occurred_at, kind,
           CASE WHEN kind = 'observed' THEN coalesce(x, $initial) END, kind = 'observed'
    FROM n WHERE i = 1
    UNION ALL
    SELECT n.domain, n.fact_type, n.key, n.value, n.i, n.seq, n.occurred_at,
           CASE WHEN n.kind = 'observed' AND w.alive THEN 'confirmed' ELSE n.kind END,
           CASE WHEN n.kind = 'observed' THEN
                    CASE WHEN w.alive THEN w.confidence + $rate * (1 - w.confidence) ELSE coalesce(n.x, $initial) END
                WHEN n.kind = 'contradicted' AND w.alive THEN w.confidence * n.x
                ELSE w.confidence END,
           CASE WHEN n.kind = 'observed' THEN true WHEN n.kind = 'pruned' THEN false ELSE w.alive END
    FROM walk w JOIN n ON n.domain = w.domain AND n.fact_type = w.fact_type AND n.key = w.key
                       AND n.value = w.value AND n.i = w.i + 1
)
SELECT seq, occurred_at, domain, fact_type, key, value, kind AS event, round(confidence, 6) AS confidence, alive
FROM walk ORDER BY seq, domain, fact_type, key, value;

-- name: contradictions
SELECT seq, occurred_at, domain, fact_type, key, old_values, new_value, factor, run_id
FROM fact_contradicted ORDER BY seq;

-- name: pruned
SELECT seq, occurred_at, fact_domain AS domain, fact_type, key, value, round(confidence, 6) AS confidence, threshold
FROM facts_pruned ORDER BY seq, domain, fact_type, key, value;
