-- Promotions: the funnel recorded -> deduplicated -> promoted, time to promotion,
-- by category and by domain. A lesson is born at its first lesson_recorded; its
-- category is the one it was recorded with, its domain the scope domain if any,
-- else the domain where it was first recorded.

-- name: funnel
-- empty: No lesson was learned in this ledger.
WITH born AS (
    SELECT * FROM lesson_recorded QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
), stages AS (
    SELECT 1 AS ord, 'recorded' AS stage, count(*) AS lessons FROM born
    UNION ALL
    SELECT 2, 'deduplicated', count(*) FROM born WHERE lesson_id IN (SELECT lesson_id FROM lesson_deduplicated)
    UNION ALL
    SELECT 3, 'promoted', count(*) FROM born WHERE lesson_id IN (SELECT lesson_id FROM lesson_promoted)
)
SELECT stage, lessons,
       round(lessons / nullif((SELECT lessons FROM stages WHERE ord = 1), 0), 4) AS share_of_recorded
FROM stages ORDER BY ord;

-- name: time_to_promotion
-- empty: No lesson was promoted in this ledger.
WITH born AS (
    SELECT * FROM lesson_recorded QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
), promo AS (
    SELECT * FROM lesson_promoted QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
)
SELECT b.lesson_id, b.lesson, b.category, coalesce(b.scope_domain, b.domain) AS domain,
       b.seq AS recorded_seq, p.seq AS promoted_seq, b.occurred_at AS recorded_at, p.occurred_at AS promoted_at,
       round(epoch(p.occurred_ts - b.occurred_ts) / 3600.0, 3) AS hours_to_promotion,
       (SELECT count(*) FROM lesson_deduplicated d WHERE d.lesson_id = b.lesson_id AND d.seq <= p.seq) AS dedups_before,
       p.use_count, len(p.triggered_domains) AS domains
FROM born b JOIN promo p USING (lesson_id)
ORDER BY p.seq;

-- name: by_category
-- empty: No lesson was learned in this ledger.
WITH born AS (
    SELECT * FROM lesson_recorded QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
), promo AS (
    SELECT * FROM lesson_promoted QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
)
SELECT b.category, count(*) AS recorded,
       count(*) FILTER (WHERE b.lesson_id IN (SELECT lesson_id FROM lesson_deduplicated)) AS deduplicated,
       count(p.lesson_id) AS promoted,
       (SELECT count(*) FROM lesson_deduplicated d WHERE d.category = b.category) AS dedup_events,
       round(median(epoch(p.occurred_ts - b.occurred_ts) / 3600.0), 3) AS median_hours_to_promotion
FROM born b LEFT JOIN promo p USING (lesson_id)
GROUP BY b.category ORDER BY b.category;

-- name: by_domain
-- empty: No lesson was learned in this ledger.
WITH born AS (
    SELECT *, coalesce(scope_domain, domain, '-') AS where_domain
    FROM lesson_recorded QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
), promo AS (
    SELECT * FROM lesson_promoted QUALIFY row_number() OVER (PARTITION BY lesson_id ORDER BY seq) = 1
)
SELECT b.where_domain AS domain, count(*) FILTER (WHERE b.scope_domain IS NOT NULL) AS scoped, count(*) AS recorded,
       count(*) FILTER (WHERE b.lesson_id IN (SELECT lesson_id FROM lesson_deduplicated)) AS deduplicated,
       count(p.lesson_id) AS promoted,
       round(median(epoch(p.occurred_ts - b.occurred_ts) / 3600.0), 3) AS median_hours_to_promotion
FROM born b LEFT JOIN promo p USING (lesson_id)
GROUP BY 1 ORDER BY 1;
