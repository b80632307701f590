"""Projections: every memory the agent uses, folded deterministically from the ledger, by job.

- `folds/`: one module per projection with a pure `apply(state, event) -> state`, the registry
  (`folds.FOLDS`) and `folds.state`, the driver that folds them all.
- `cache/`: the engine that keeps the folds' states in projections.db.
- `interop/`: import and export of other agents' memory formats.
- `recording/`: the public API (`Memory`, `Run`, post-run learning).
- `view.py` is the read side, `writer.py` appends observations together with the policy
  decisions they cause (decisions.py, under the thresholds of parameters.py).
"""
