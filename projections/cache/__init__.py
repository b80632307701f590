"""The cache engine: projections.db, what memory is served from, beside the folds it runs.

The folds (`projections/*.py`) say what memory is; this package keeps it so that it is read
without folding the log again: `materialize` catches projections.db up and serves states,
`db` opens, checks and writes the file, `intervals` files every version of the indexed projections with the seqs it held in,
`mentions` indexes which events name an item and `compression` packs what is stored; a cache file
is authenticated whole by `ledger.seal` (projections.db and the analytics mirror alike). A layer
above that copies the cache (the analytics mirror) reads it through one door:
`materialize.interval_versions`.
"""
