"""Projections: every memory the agent uses, folded deterministically from the ledger.

`MemoryView` (view.py) is the read side, `MemoryWriter` (writer.py) appends
observations together with the policy decisions they cause (decisions.py, under
the thresholds of parameters.py).
Each projection is one module with a pure `apply(state, event) -> state`.
"""
