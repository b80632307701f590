"""The cache engine: projections.db, what memory is served from, beside the folds it runs.

The folds (`projections/*.py`) say what memory is; this package keeps it so that it is read
without folding the log again: `materialize` catches projections.db up and serves states,
`db` opens, checks and writes the file, `intervals` files every version of the indexed projections with the seqs it held in,
`mentions` indexes which events name an item, `compression` packs what is stored, and `seal`
authenticates a cache file as a whole (projections.db and the analytics mirror alike).
"""
