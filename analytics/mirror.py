"""The analytics mirror: a disposable DuckDB database (`analytics.duckdb`) beside projections.db.

It holds what every `memtape analytics ...` answer reads, in DuckDB's own
columnar storage, so a question at a million events is not a fresh copy of the
ledger through the sqlite scanner:

- `events`: every event as analytics may show it — read through the ledger's
  checked reads (upcast), with `lesson_id` filled as the lessons projection
  fills it, and forgotten subjects left out or masked by `Forgotten.shown` (so
  forgotten content is not in the file at all); stored clustered by type, then seq, so that
  a question about a few types reads only their row groups (`ORDER BY seq` for the log's order);
- `intervals`: the validity intervals of the indexed projections, copied from
  projections.db (each version's seal checked): `projection`, `field`, `item`,
  `part` (the inner key of a two-level field), `valid_from`, `valid_to` (NULL
  while current) and the item as JSON (`value`) — every indexed projection but short-term memory;
- `short_term_intervals`: the versions of short-term memory (one per step of a run: `run_id`,
  `valid_from`, `valid_to`), each as a typed STRUCT (`value`, `SHORT_TERM_ITEM`) rather than JSON
  text: a version re-files the run's whole recent history, and DuckDB's columns (urls, keys and
  event ids dictionary-encoded) hold them in a quarter of the space the JSON takes;
- `step_as_of`: the seq each step of each run reads its memory at, as
  `asof.as_of_seq` decides it (the view `memory_at_step` joins it to both interval tables).

It is caught up incrementally from its own checkpoint (`_mirror`: the seq it
holds, the ledger's hash there, the code and projections it was built with, the
digest of its tables), sealed as projections.db's is (`ledger.seal`: one
mechanism for both caches: a keyed digest per table kept as rows come and go, a
sealed checkpoint bound to the ledger head, a sealed stamp of the file so one
nobody else touched is not read whole). DuckDB computes each row's keyed hash itself
(`_ROW_HASH`), so a catch-up hashes only the rows it touches. The mirror is never evidence: it is
rebuilt from the ledger — into a new file, so nothing of the old one survives —
when its checkpoint is not sealed by this memory's key, the ledger no longer
holds the hash it saw, its rows do not match their digest (keyed by this memory)
or its tables, views and macros are not this code's, its code or the projections'
fingerprints changed, or a forget was recorded since. Whatever is in the mirror's
place that is not a regular file (a link, a FIFO) is replaced, never opened.

Usage::

    con = connect(store)                  # caught up; the typed views of sql/views.sql defined
    con.sql("SELECT * FROM memory_at_step WHERE run_id = 'r1' AND step = 2").fetchall()
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import orjson

from memtape.analytics.asof import STEP_TYPES, as_of_seq
from memtape.analytics.forget_filter import Forgotten, lesson_id_of
from memtape.analytics.queries import sql_text
from memtape.ledger import location
from memtape.ledger.envelope import RecordedEvent
from memtape.ledger.errors import LedgerError
from memtape.ledger.events import EVENT_TYPES
from memtape.ledger.seal import Checkpoint, Digest, Key, Stamp, regular, warn
from memtape.ledger.store import Store
from memtape.projections.cache.materialize import interval_versions
from memtape.projections.folds import INDEXED
from memtape.projections.folds.state import fingerprint, sources_digest
from memtape.projections.parameters import DEFAULT_POLICY, Thresholds

if TYPE_CHECKING:
    import pyarrow as pa

FORMAT = 4  # the layout of the tables below (3: events clustered by type, 4: short_term_intervals); a change rebuilds every mirror
#: DuckDB never downloads anything
CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}
BATCH = 20_000
#: a version of one run's short-term memory (`projections.folds.short_term.ShortTerm` as its canonical JSON
#: gives it): the cast from that JSON is strict, so a field added to ShortTerm fails the build loudly
#: instead of being dropped
SHORT_TERM_ITEM = (
    "STRUCT(run_id VARCHAR, goal VARCHAR, domain VARCHAR, recent STRUCT(error VARCHAR, key VARCHAR, "
    "ok BOOLEAN, priority VARCHAR, signature VARCHAR, step BIGINT, url VARCHAR)[], "
    "failed_signatures VARCHAR[], action_frequency MAP(VARCHAR, BIGINT), loop_warnings VARCHAR[], "
    "navigation_path VARCHAR[], current_url VARCHAR, cycle_count BIGINT, event_ids VARCHAR[], "
    "session_id VARCHAR, visited_urls VARCHAR[], completed BOOLEAN)"
)

DDL = (
    "CREATE TABLE events (seq BIGINT NOT NULL, id VARCHAR, stream VARCHAR, stream_version BIGINT, type VARCHAR, "
    "schema_version INTEGER, recorded_at VARCHAR, occurred_at VARCHAR, recorded_ts TIMESTAMP, "
    "occurred_ts TIMESTAMP, run_id VARCHAR, step BIGINT, domain VARCHAR, lesson_id VARCHAR, payload JSON)",
    "CREATE TABLE intervals (projection VARCHAR NOT NULL, field VARCHAR NOT NULL, item VARCHAR, part VARCHAR, "
    "valid_from BIGINT NOT NULL, valid_to BIGINT, value JSON)",
    f"CREATE TABLE short_term_intervals (run_id VARCHAR NOT NULL, valid_from BIGINT NOT NULL, valid_to BIGINT, "
    f"value {SHORT_TERM_ITEM})",
    "CREATE TABLE step_as_of (run_id VARCHAR NOT NULL, step BIGINT NOT NULL, as_of_seq BIGINT NOT NULL)",
    "CREATE TABLE _mirror (seq BIGINT, ledger_hash VARCHAR, version VARCHAR, digest VARCHAR, mac VARCHAR)",
)
#: the projections whose versions the mirror holds: every indexed one
MIRRORED = tuple(INDEXED)
_EVENT_COLS = (
    "seq",
    "id",
    "stream",
    "stream_version",
    "type",
    "schema_version",
    "recorded_at",
    "occurred_at",
    "run_id",
    "step",
    "domain",
    "lesson_id",
    "payload",
)
#: Arrow type names of the batches (pyarrow loads only to fill the mirror: a current one is read without it)
_EVENT_TYPES = (
    "int64",
    "string",
    "string",
    "int64",
    "string",
    "int32",
    "string",
    "string",
    "string",
    "int64",
    "string",
    "string",
    "string",
)
#: the rows of one catch-up, gathered before they go into `events`
_STAGE_EVENTS = (
    "CREATE OR REPLACE TEMP TABLE staged_events (seq BIGINT, id VARCHAR, stream VARCHAR, "
    "stream_version BIGINT, type VARCHAR, schema_version INTEGER, recorded_at VARCHAR, occurred_at VARCHAR, "
    "run_id VARCHAR, step BIGINT, domain VARCHAR, lesson_id VARCHAR, payload VARCHAR)"
)
#: events go in clustered by type, then seq: a question about a few types (the lesson events of
#: `promotions`) reads only the row groups that hold them — DuckDB skips the others by their min
#: and max `type` — not the payloads of the whole log
_INSERT_EVENTS = (
    "INSERT INTO events SELECT seq, id, stream, stream_version, type, schema_version, recorded_at, "
    "occurred_at, CAST(recorded_at AS TIMESTAMP), CAST(occurred_at AS TIMESTAMP), run_id, step, domain, "
    "lesson_id, CAST(payload AS JSON) FROM staged_events ORDER BY type, seq"
)
_INTERVAL_COLS = ("projection", "field", "item", "part", "valid_from", "valid_to", "value")
_INTERVAL_TYPES = ("string", "string", "string", "string", "int64", "int64", "string")
#: the tables the digest covers, in its order
_DIGESTED = ("events", "intervals", "short_term_intervals", "step_as_of")
#: a row `t`'s keyed hash: a keyed MD5 of its JSON (the `?` is `_row_key`), its lower 64 bits. DuckDB's
#: own `hash()` is keyless and invertible: an editor can rewrite a row and set one integer column so
#: that the row hashes as before, and the digest would hold
_ROW_HASH = "md5_number_lower(? || to_json(t))"
#: what the mirror's checkpoint names it in its seal
SOURCE = "analytics mirror"
#: DuckDB's write-ahead log beside the file
LOGS = (".wal",)
#: every object of the mirror's own database, and every column of its tables and views: a touched
#: file must hold exactly what this code creates (its views and macros are then created again, so
#: a view or macro rewritten in the file cannot change an answer)
_CATALOG = (
    " UNION ALL ".join(
        f"SELECT '{kind}', schema_name, {name}, {detail} FROM {function}() WHERE database_name = current_database(){more}"
        for kind, function, name, detail, more in (
            (
                "column",
                "duckdb_columns",
                "table_name",
                "column_name || ' ' || data_type || CASE WHEN is_nullable "
                "THEN '' ELSE ' NOT NULL' END || coalesce(' DEFAULT ' || column_default, '')",
                "",
            ),
            ("constraint", "duckdb_constraints", "table_name", "constraint_text", ""),
            ("table", "duckdb_tables", "table_name", "''", ""),
            ("view", "duckdb_views", "view_name", "''", " AND NOT internal"),
            ("function", "duckdb_functions", "function_name", "function_type", " AND NOT internal"),
            ("index", "duckdb_indexes", "index_name", "''", ""),
            ("sequence", "duckdb_sequences", "sequence_name", "''", ""),
            ("type", "duckdb_types", "type_name", "''", " AND NOT internal"),
        )
    )
    + " ORDER BY ALL"
)


def _row_key(projections: Path) -> str:
    """The key of the rows' hashes: this memory's own (an editor without it cannot recompute a row's)."""
    return Key.beside(projections).mac("analytics mirror rows")


def _rows_digest(con: duckdb.DuckDBPyConnection, key: str) -> Digest:
    """Every table of the mirror on `con` hashed whole, under `key`."""
    digest = Digest(_DIGESTED)
    for table in _DIGESTED:
        n, total = con.execute(f"SELECT count(*), coalesce(sum({_ROW_HASH}), 0) FROM {table} t", (key,)).fetchone()  # type: ignore[misc]
        digest.add(table, int(n), int(total))
    return digest


class _Tally:
    """The mirror's digest kept up to date while a catch-up deletes and inserts rows: a row's hash
    goes out as it came in, so a catch-up hashes the rows it touches, not the whole mirror again.
    Without a key (a private mirror in memory, never checked) nothing is hashed."""

    def __init__(self, key: str | None, digest: str | None = None):
        self.key = key
        self.digest = Digest(_DIGESTED, digest)

    def count(
        self, con: duckdb.DuckDBPyConnection, table: str, rows: str, params: Sequence[Any] = (), sign: int = 1
    ) -> None:
        """Add (`sign` 1) or take out (-1) the rows of `table` (as `t`) that `rows` selects."""
        if self.key is None:
            return
        n, total = con.execute(
            f"SELECT count(*), coalesce(sum({_ROW_HASH}), 0) FROM {table} t {rows}", (self.key, *params)
        ).fetchone()  # type: ignore[misc]
        self.digest.add(table, int(n), int(total), sign)

    def __str__(self) -> str:
        return str(self.digest)


_STEP_TYPES = ", ".join(f"'{t}'" for t in STEP_TYPES)
#: the step events of every run that has one after a seq, in log order (events before a run's first step are step 0)
_STEP_EVENTS = (
    f"SELECT run_id, coalesce(step, 0), seq, type FROM events WHERE type IN ({_STEP_TYPES}) AND run_id IN "
    f"(SELECT DISTINCT run_id FROM events WHERE seq > ? AND type IN ({_STEP_TYPES}) AND run_id IS NOT NULL) "
    "ORDER BY seq"
)


#: event type -> the payload version this code writes (a stored payload of that version is kept as stored)
_CURRENT = {name: cls.CURRENT_VERSION for name, cls in EVENT_TYPES.items()}


class MirrorStale(Exception):
    """The mirror cannot be caught up from where it is (it is rebuilt)."""


def _code_version(policy: Thresholds) -> str:
    """What the mirror's rows depend on: its layout, DuckDB's version (row hashes), the code that
    decides what events show (this module's import closure: forget, lesson ids, upcasters through
    the ledger's reads), the views it holds and the fingerprints of the projections whose
    intervals it copies."""
    h = hashlib.sha256(f"{FORMAT}:{duckdb.__version__}".encode())
    h.update(sources_digest(__name__).encode())
    h.update(sql_text("views").encode())
    h.update("|".join(fingerprint(name, policy) for name in MIRRORED).encode())
    return h.hexdigest()[:32]


# ---- filling ------------------------------------------------------------------------------


def _event_rows(events: Iterable[RecordedEvent], forgotten: Forgotten) -> Iterator[pa.Table]:
    """Batches of `events` rows, as `Forgotten.shown` lets analytics see them."""
    cols: list[list[Any]] = [[] for _ in _EVENT_COLS]
    for ev in events:
        shown = forgotten.shown(ev)
        if shown is None:
            continue
        run_id, step, domain, data = shown
        as_stored = data is ev.data and _CURRENT.get(ev.type) == ev.schema_version  # neither scrubbed nor upcast
        row = (
            ev.seq,
            ev.id,
            forgotten.stream(ev),
            ev.stream_version,
            ev.type,
            ev.schema_version,
            ev.recorded_at,
            ev.occurred_at,
            run_id,
            step,
            domain,
            lesson_id_of(ev),
            ev.payload_json if as_stored else orjson.dumps(data).decode(),
        )
        for col, value in zip(cols, row):
            col.append(value)
        if len(cols[0]) >= BATCH:
            yield arrow_table(_EVENT_COLS, _EVENT_TYPES, cols)
            cols = [[] for _ in _EVENT_COLS]
    if cols[0]:
        yield arrow_table(_EVENT_COLS, _EVENT_TYPES, cols)


def mirrored_events(con: duckdb.DuckDBPyConnection, types: Iterable[str]) -> Iterator[RecordedEvent]:
    """The mirror's events of `types` (as analytics may show them) in seq order, for the relations an
    answer computes in Python from them."""
    cursor = con.execute(
        "SELECT seq, id, stream, stream_version, type, schema_version, recorded_at, occurred_at, run_id, "
        "step, domain, CAST(payload AS VARCHAR) FROM events WHERE list_contains(?, type) ORDER BY seq",
        [list(types)],
    )
    while rows := cursor.fetchmany(10_000):
        for seq, id_, stream, version, type_, schema, recorded, occurred, run_id, step, domain, payload in rows:
            yield RecordedEvent(
                seq,
                id_,
                stream,
                version,
                type_,
                schema,
                recorded,
                occurred,
                run_id,
                step,
                domain,
                orjson.loads(payload),
                payload,
                "",
                "",
            )


def arrow_table(names: Iterable[str], types: Iterable[str], cols: list[list[Any]]) -> pa.Table:
    """Columns as one Arrow table to register on a DuckDB connection (`types`: Arrow type aliases)."""
    import pyarrow as pa  # it brings numpy (~0.1 s): only filling the mirror and decay's walk need it

    return pa.table({name: pa.array(col, type=pa.type_for_alias(t)) for name, t, col in zip(names, types, cols)})


def _append_events(con: duckdb.DuckDBPyConnection, store: Store, after: int, head: int, forgotten: Forgotten) -> None:
    """The events after `after` up to `head`, gathered, then appended clustered by type (`_INSERT_EVENTS`)."""
    con.execute(_STAGE_EVENTS)
    for batch in _event_rows(store.read(after + 1, head, batch=5000), forgotten):
        con.register("batch", batch)
        con.execute("INSERT INTO staged_events SELECT * FROM batch")
        con.unregister("batch")
    con.execute(_INSERT_EVENTS)
    con.execute("DROP TABLE staged_events")


def _update_steps(con: duckdb.DuckDBPyConnection, after: int, tally: _Tally) -> None:
    """`step_as_of` again for every run with a step event after `after` (a later event of a step,
    its action after its prompt, can move the seq it is read at)."""
    steps: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for run_id, step, seq, type_ in con.execute(_STEP_EVENTS, (after,)).fetchall():
        steps.setdefault((run_id, step), []).append((seq, type_))
    if not steps:
        return
    runs = sorted({run_id for run_id, _ in steps})
    theirs = "WHERE run_id IN (SELECT unnest(?::VARCHAR[]))"
    tally.count(con, "step_as_of", theirs, (runs,), -1)
    con.execute(f"DELETE FROM step_as_of {theirs}", (runs,))
    rows = [(run_id, step, as_of_seq(evs)) for (run_id, step), evs in steps.items()]
    con.register(
        "batch",
        arrow_table(("run_id", "step", "as_of_seq"), ("string", "int64", "int64"), [list(col) for col in zip(*rows)]),
    )
    con.execute("INSERT INTO step_as_of SELECT run_id, step, as_of_seq FROM batch")
    con.unregister("batch")
    tally.count(con, "step_as_of", theirs, (runs,))


def _interval_rows(
    store: Store, projections: Path, policy: Thresholds, after: int, head: int
) -> Iterator[tuple[str, pa.Table]]:
    """The interval versions projections.db holds that began after `after`, or ended after it
    (closed since), as of `head` (`materialize.interval_versions`, the cache's door): a version
    still current at `head` has no `valid_to`."""
    for name, rows in interval_versions(store, projections, policy, MIRRORED, after, head):
        cols: list[list[Any]] = [[] for _ in _INTERVAL_COLS]
        for field, item, part, valid_from, valid_to, value in rows:
            for col, v in zip(cols, (name, field, item, part, valid_from, valid_to, value.decode())):
                col.append(v)
        yield name, arrow_table(_INTERVAL_COLS, _INTERVAL_TYPES, cols)


def _delete_versions(con: duckdb.DuckDBPyConnection, tally: _Tally, table: str, same: str) -> None:
    """Delete the rows of `table` that the registered `batch` holds again (`same`: the condition on a
    stored row `t` and a batch row `b`), taken out of the digest's tally first."""
    tally.count(con, table, f"SEMI JOIN batch b ON {same}", sign=-1)
    con.execute(f"DELETE FROM {table} AS t USING batch b WHERE {same}")


def _copy_intervals(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    projections: Path,
    policy: Thresholds,
    after: int,
    head: int,
    tally: _Tally,
) -> None:
    """Bring `intervals` and `short_term_intervals` from `after` to `head` (versions closed since
    replace their open rows). Short-term versions are gathered first and go in ordered by run, then
    seq: a run's versions side by side share their urls, keys and event ids within a column segment
    (14 MB at 300,000 events, against 20 MB in the order projections.db gives them)."""
    batches = _interval_rows(store, projections, policy, after, head)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE staged_short_term (run_id VARCHAR, valid_from BIGINT, valid_to BIGINT, "
        "value VARCHAR)"
    )
    # the same version (`t` a stored row, `b` a new one): short-term memory's by run (the batch's
    # `item`, the staged rows' `run_id`) and seq, the others' by their whole key
    short_term = "t.run_id = b.{} AND t.valid_from = b.valid_from"
    versions = (
        "t.projection = b.projection AND t.field = b.field AND t.item IS NOT DISTINCT FROM b.item "
        "AND t.part IS NOT DISTINCT FROM b.part AND t.valid_from = b.valid_from"
    )
    for projection, batch in batches:
        con.register("batch", batch)
        if projection == "short_term":
            _delete_versions(con, tally, "short_term_intervals", short_term.format("item"))
            con.execute("INSERT INTO staged_short_term SELECT item, valid_from, valid_to, value FROM batch")
        else:
            _delete_versions(con, tally, "intervals", versions)
            con.execute(
                "INSERT INTO intervals SELECT projection, field, item, part, valid_from, valid_to, "
                "CAST(value AS JSON) FROM batch"
            )
            tally.count(con, "intervals", f"SEMI JOIN batch b ON {versions}")
        con.unregister("batch")
    con.execute(
        f"INSERT INTO short_term_intervals SELECT run_id, valid_from, valid_to, "
        f"CAST(CAST(value AS JSON) AS {SHORT_TERM_ITEM}) FROM staged_short_term ORDER BY run_id, valid_from"
    )
    tally.count(con, "short_term_intervals", f"SEMI JOIN staged_short_term b ON {short_term.format('run_id')}")
    con.execute("DROP TABLE staged_short_term")


def _fill(
    con: duckdb.DuckDBPyConnection, store: Store, projections: Path | None, policy: Thresholds, after: int, head: int
) -> None:
    """Events and intervals from `after` to `head`, the checkpoint and the views, in one transaction."""
    con.execute("BEGIN")
    try:
        held = con.execute("SELECT digest FROM _mirror").fetchone() if after > 0 else None
        tally = _Tally(
            _row_key(projections) if projections is not None else None, held[0] if held is not None else None
        )
        _append_events(con, store, after, head, Forgotten.scan(store, head))
        tally.count(con, "events", "WHERE seq > ?", (after,))
        _update_steps(con, after, tally)
        if projections is not None:
            _copy_intervals(con, store, projections, policy, after, head, tally)
        con.execute("DELETE FROM _mirror")
        if projections is not None:
            version, ledger_hash = _code_version(policy), store.hash_at(head) or ""
            digest = str(tally)
            sealed = Checkpoint(head, ledger_hash, version, digest)
            con.execute(
                "INSERT INTO _mirror VALUES (?, ?, ?, ?, ?)",
                (head, ledger_hash, version, digest, sealed.mac(Key.beside(projections), SOURCE)),
            )
        con.execute(sql_text("views"))
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


# ---- opening --------------------------------------------------------------------------


def _start(
    con: duckdb.DuckDBPyConnection, store: Store, projections: Path, policy: Thresholds, check_rows: bool
) -> int:
    """The seq the mirror holds, once its checkpoint, its rows (`check_rows`: their digest; else the
    file is known untouched) and the ledger agree; MirrorStale (why, for a warning; '' when only
    rebuilt) otherwise."""
    try:
        rows = con.execute("SELECT seq, ledger_hash, version, digest, mac FROM _mirror").fetchall()
    except duckdb.Error as exc:
        raise MirrorStale(f"unreadable ({str(exc).splitlines()[0]})") from exc
    if len(rows) != 1:
        raise MirrorStale("no checkpoint")
    seq, ledger_hash, version, digest, mac = rows[0]
    if not Checkpoint(seq, ledger_hash, version, digest).holds(Key.beside(projections), SOURCE, mac):
        raise MirrorStale("its checkpoint is not sealed by this memory's key")
    if version != _code_version(policy):
        raise MirrorStale("")
    if seq > 0 and store.hash_at(seq) != ledger_hash:
        raise MirrorStale(f"the ledger no longer holds the hash it saw at seq {seq}")
    if check_rows and _rows_digest(con, _row_key(projections)) != Digest(_DIGESTED, digest):
        raise MirrorStale("its rows were edited")
    if check_rows and con.execute(_CATALOG).fetchall() != _catalog():
        raise MirrorStale("its tables, views or macros were changed")
    if any(True for _ in store.read(seq + 1, types=["subject_forgotten"], batch=1)):
        raise MirrorStale("")  # a forget since: rebuilt into a new file, so no byte of the subject survives
    return int(seq)


@functools.cache
def _catalog() -> list[tuple[Any, ...]]:
    """`_CATALOG` of a mirror as this code creates it (built once, in memory)."""
    con = duckdb.connect(config=CONFIG)
    try:
        for ddl in DDL:
            con.execute(ddl)
        con.execute(sql_text("views"))
        return con.execute(_CATALOG).fetchall()
    finally:
        con.close()


def _stamp(target: Path, projections: Path) -> Stamp:
    """The mirror file's sealed stamp (`ledger.seal.Stamp`)."""
    return Stamp(target, Key.beside(projections), LOGS)


def _seal_file(target: Path, projections: Path) -> None:
    """Remember, sealed, the file as this process left it."""
    stamp = _stamp(target, projections)
    with stamp.locked():
        stamp.seal()


def _untouched(target: Path, projections: Path) -> bool:
    """The file is as this memory last left it: its sealed stamp holds (then its rows need no
    digest: the cold path reads only what a query needs)."""
    return _stamp(target, projections).holds()


def _remove(path: Path) -> None:
    """Delete a mirror file and its WAL (whatever they are, bar a directory: a clear error)."""
    for p in (path, Path(f"{path}.wal")):
        try:
            p.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise LedgerError(f"{p}: cannot remove it ({exc.strerror}); move it out of the memory directory") from None


def _move(tmp: Path, path: Path, why: str) -> None:
    """`tmp` moved over `path`; if it cannot be (a directory in the way), `tmp` goes and the error names `path`."""
    try:
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise LedgerError(f"{path}: {why} ({exc.strerror}); move it out of the memory directory") from None


def _rebuild(store: Store, projections: Path, policy: Thresholds, head: int) -> None:
    """A new mirror up to `head`, written beside the old one and moved over it."""
    target = location.mirror_path(projections)
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    _remove(tmp)
    con = duckdb.connect(str(tmp), config=CONFIG)
    try:
        for ddl in DDL:
            con.execute(ddl)
        _fill(con, store, projections, policy, 0, head)
    except BaseException:
        con.close()
        _remove(tmp)
        raise
    con.close()
    os.chmod(tmp, 0o600)
    try:
        _remove(Path(f"{target}.wal"))  # an old log must not be replayed onto the new file
    except LedgerError:
        _remove(tmp)
        raise
    _move(tmp, target, "cannot put the rebuilt analytics mirror there")
    _seal_file(target, projections)


def _held_elsewhere(exc: BaseException) -> bool:
    """DuckDB refused the file because another process holds its write lock (its own message, not
    any error that happens to say "lock": the path may, as in /home/sherlock/)."""
    return isinstance(exc, duckdb.IOException) and "Could not set lock on file" in str(exc)


def _caught_up(store: Store, projections: Path, policy: Thresholds) -> duckdb.DuckDBPyConnection:
    """The mirror file at the ledger's head, opened read-only. A file left untouched since this
    memory last wrote it is opened read-only straight away (no digest of its rows); otherwise it
    is opened to write, checked whole, caught up, sealed again and reopened read-only."""
    target = location.mirror_path(projections)
    head = int(store.head())
    for attempt in (1, 2):
        con = None
        if os.path.lexists(target):
            try:
                if not regular(target):
                    raise MirrorStale("not a regular file")
                wal = Path(f"{target}.wal")
                if os.path.lexists(wal) and not regular(wal):
                    _remove(wal)  # DuckDB would replay it: block on a FIFO, or read through a link
                untouched = _untouched(target, projections)
                con = duckdb.connect(str(target), read_only=untouched, config=CONFIG)
                start = _start(con, store, projections, policy, check_rows=not untouched)
                if untouched and start == head:
                    return con
                if untouched:  # behind: reopened to write, and read again under the write lock
                    con.close()
                    con = duckdb.connect(str(target), config=CONFIG)
                    start = _start(con, store, projections, policy, check_rows=False)
                if start < head:
                    _fill(con, store, projections, policy, start, head)
                else:  # touched, current: its views and macros made again, as a fill makes them
                    con.execute(sql_text("views"))
                con.close()
                con = None
                _seal_file(target, projections)
                return duckdb.connect(str(target), read_only=True, config=CONFIG)
            except (MirrorStale, duckdb.Error) as exc:
                if con is not None:
                    con.close()
                if _held_elsewhere(exc):
                    raise  # another process has it: the caller reads a private copy
                reason = str(exc).splitlines()[0] if str(exc) else ""
                if reason and attempt == 1:
                    warn(f"{target}: {reason}; discarded, rebuilding from the ledger")
        if attempt == 2:
            break
        _rebuild(store, projections, policy, head)
    raise LedgerError(f"{target}: cannot build the analytics mirror")


def connect(
    source: Store, projections_path: Path | None = None, policy: Thresholds = DEFAULT_POLICY
) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB connection to the mirror of `source` (a store), caught up to the ledger's
    head, with the typed views of sql/views.sql. projections.db (and the mirror beside it) is found
    beside the ledger unless given; a store without one (PostgreSQL without a memory directory, a
    forensic read) gets a private mirror in memory, holding the events only."""
    path = Path(projections_path) if projections_path is not None else location.projections_path(source)
    con = None
    if path is not None:
        try:
            con = _caught_up(source, path, policy)
        except duckdb.IOException as exc:
            if not _held_elsewhere(exc):
                raise LedgerError(f"{location.mirror_path(path)}: {str(exc).splitlines()[0]}") from exc
    if con is None:
        con = duckdb.connect(config=CONFIG)
        for ddl in DDL:
            con.execute(ddl)
        _fill(con, source, None, policy, 0, int(source.head()))
    return con
