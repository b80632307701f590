"""The public API by job: `memory.RecordingMemory` opens runs and recalls outside one, `run.Run` records one
run, `learning` is post-run learning (pure functions over the steps), `values` the records the API
hands back and learning reads, `checks` the input checks every call makes, `searching` a run's
search (`Run` inherits it; the memory's search is `RecordingMemory.search`). `memtape.open` returns a
`memtape.Memory`, a `RecordingMemory` with the analytics answers; nothing here knows the bundled
browser agent."""
