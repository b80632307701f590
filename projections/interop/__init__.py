"""Interop: bring the seed systems' memory into the ledger and take it back out.

- `importers.import_source(store, path, fmt)`: seed 001's memory.json and
  memory_events.jsonl logs, seed 000's `.agent-memory/` folder, seed 002's
  JSON export -> one `memory_imported` event plus the events that rebuild the
  same memory, in one transaction, with the source's own times.
- `exporters.export_memory(...)`: the projections' state (at any seq) ->
  seed 000's folder, seed 001's memory.json and per-run memory_events.jsonl
  logs, seed 002's json/csv/prompt.

`sources.py` holds the formats as strict models (validation = parsing);
`files.py` the digest and the writes that never leave `--out`.
"""
