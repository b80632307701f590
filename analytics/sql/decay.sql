-- Decay: confidence of facts over time, contradictions, pruning.
-- The confidence walk (the macro fact_walk in views.sql) repeats the knowledge fold in SQL:
-- a new fact starts at the observed confidence or $initial; re-observing it while current
-- confirms it (c + $rate * (1 - c)); a contradiction multiplies it by its factor; a prune
-- closes it (a later observation starts it afresh).

-- name: facts
-- empty: No fact was observed in this ledger.
SELECT domain, fact_type, key, value,
       count(*) FILTER (WHERE kind = 'observed') AS observed,
       count(*) FILTER (WHERE kind = 'confirmed') AS confirmed,
       count(*) FILTER (WHERE kind = 'contradicted') AS contradicted,
       count(*) FILTER (WHERE kind = 'pruned') AS pruned,
       min(occurred_at) AS first_seen, max(occurred_at) AS last_event_at,
       arg_max(confidence, i) AS confidence,
       CASE WHEN arg_max(alive, i) THEN 'current' ELSE 'closed' END AS status
FROM fact_walk($initial, $rate) GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, min(seq);

-- name: timeline
-- empty: No fact was observed in this ledger.
SELECT seq, occurred_at, domain, fact_type, key, value, kind AS event, round(confidence, 6) AS confidence, alive
FROM fact_walk($initial, $rate) ORDER BY seq, domain, fact_type, key, value;

-- name: contradictions
-- empty: No fact was contradicted by a later observation.
SELECT seq, occurred_at, domain, fact_type, key, old_values, new_value, factor, run_id
FROM fact_contradicted ORDER BY seq;

-- name: pruned
-- empty: No fact fell below the pruning threshold.
SELECT seq, occurred_at, fact_domain AS domain, fact_type, key, value, round(confidence, 6) AS confidence, threshold
FROM facts_pruned ORDER BY seq, domain, fact_type, key, value;
