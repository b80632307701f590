-- Credit: what each memory item was worth by counterfactual (`memtape credit`), ranked; tokens
-- spent showing it against the turns and tokens it saved.

-- name: items
-- empty: No item was credited: run `memtape credit`.
-- show: item, kind, runs, shown, changed, turns_saved, tokens_saved, success_saved, tokens_spent_estimate, text
-- tokens_spent_estimate is an estimate: the item's text at 4 characters a token, once per decision it was shown to.
SELECT item, any_value(kind) AS kind, count(*) AS runs, sum(shown) AS shown, sum(changed) AS changed,
       sum(turns_saved) AS turns_saved, sum(tokens_saved) AS tokens_saved, sum(success_saved) AS success_saved,
       sum(shown * ceil(length(text) / 4.0))::BIGINT AS tokens_spent_estimate,
       string_agg(DISTINCT method, ', ' ORDER BY method) AS method, any_value(text) AS text
FROM item_credited GROUP BY item
ORDER BY success_saved DESC, turns_saved DESC, tokens_saved DESC, changed DESC, item;

-- name: by_kind
-- empty: No item was credited: run `memtape credit`.
SELECT kind, count(DISTINCT item) AS items, count(DISTINCT item) FILTER (WHERE changed > 0) AS items_that_changed,
       sum(shown) AS shown, sum(changed) AS changed, sum(turns_saved) AS turns_saved,
       sum(tokens_saved) AS tokens_saved
FROM item_credited GROUP BY kind ORDER BY turns_saved DESC, kind;
