-- Decay: confidence of facts over time, contradictions, pruning.
-- fact_walk is the knowledge fold itself (analytics/decay.py runs projections/knowledge.py over
-- the mirror's fact events): one row per event that changed a fact (observed, confirmed,
-- contradicted, pruned) with the fact as the fold left it. Nothing here re-derives the rule.

-- name: facts
-- empty: No fact was observed in this ledger.
SELECT domain, fact_type, key, value,
       count(*) FILTER (WHERE kind = 'observed') AS observed,
       count(*) FILTER (WHERE kind = 'confirmed') AS confirmed,
       count(*) FILTER (WHERE kind = 'contradicted') AS contradicted,
       count(*) FILTER (WHERE kind = 'pruned') AS pruned,
       min(occurred_at) AS first_seen, max(occurred_at) AS last_event_at,
       arg_max(confidence, seq) AS confidence,
       CASE WHEN arg_max(alive, seq) THEN 'current' ELSE 'closed' END AS status
FROM fact_walk GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, min(seq);

-- name: timeline
-- empty: No fact was observed in this ledger.
SELECT seq, occurred_at, domain, fact_type, key, value, kind AS event, round(confidence, 6) AS confidence, alive
FROM fact_walk ORDER BY seq, domain, fact_type, key, value;

-- name: contradictions
-- empty: No fact was contradicted by a later observation.
SELECT seq, occurred_at, domain, fact_type, key, old_values, new_value, factor, run_id
FROM fact_contradicted ORDER BY seq;

-- name: pruned
-- empty: No fact fell below the pruning threshold.
SELECT seq, occurred_at, fact_domain AS domain, fact_type, key, value, round(confidence, 6) AS confidence, threshold
FROM facts_pruned ORDER BY seq, domain, fact_type, key, value;
