"""Projections: rebuild throughput, as-of latency and recall latency, each beside a baseline
measured in the same run.

- rebuild of projections.db from N synthetic agent events (default 1,000,000: runs, steps,
  grades, recalls, lessons with their decisions, facts, selectors, trajectories, sessions)
  vs a raw scan+decode of the same events (sqlite3 reading every row, orjson decoding every
  payload), and projections.db's size against the ledger's; what bounds a rebuild, each against
  the same scan: the ledger's verified read alone (every event's link and hash checked, as every
  read does; also against its own floor, every column read and every row hashed with nothing
  checked or built), the folds alone over the events already read into memory (and each
  projection folded alone: where their time goes), and the two together (a rebuild cannot be
  faster than reading and folding);
- as-of latency at random seqs through the validity intervals (one projection's items by key, as
  an agent or audit asks; and whole projections) vs folding the first n events from scratch;
  every whole projection at every seq also vs decoding the same answer from one JSON document
  (no index: the floor of building that many items in Python), counting the calls within 3x of it;
- `audit` of the last run through the library, vs folding its memory from seq 1;
- `explain` of a lesson through the library (its life by the index of mentions), vs reading every
  lesson event;
- recall with 100,000 lessons and 10,000 trajectories — tier 2 on error, on domain, trajectory
  match — p50/p99 vs a linear scan of the same lessons / trajectories (results checked equal).

Usage::

    python bench/projections.py                  # 1,000,000 events
    python bench/projections.py --events 100000  # a quicker run
    python bench/projections.py --json           # one JSON object: events, rebuild_events_per_s,
                                                 # raw_scan_events_per_s, folds_alone_events_per_s,
                                                 # verified_read_events_per_s, verified_read_floor_events_per_s,
                                                 # read_and_folds_events_per_s, fold_alone_us_per_event,
                                                 # asof_p99_ms, asof_whole_within_3x, checked_whole_ms, audit_ms,
                                                 # explain_ms, projections_db_bytes, ledger_bytes,
                                                 # figures
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import Figure, print_json, show
from devtools.synthetic import COMMANDS, ERRORS, VOCAB, build_ledger
from memtape.ledger.clock import format_ts, parse_ts
from memtape.ledger.store import COLUMNS, SqliteStore, chain_hash
from memtape.projections.cache.materialize import collector_paused, indexed_memory, projection_at, rebuild
from memtape.projections.folds import FOLDS
from memtape.projections.folds import lessons as lessons_mod
from memtape.projections.folds.lessons import LessonEntry, LessonsState
from memtape.projections.folds.state import PROJECTIONS, MemoryState, decode, encode, fold
from memtape.projections.folds.trajectories import Trajectory, TrajectoryStep, rank
from memtape.projections.parameters import Thresholds
from memtape.projections.text import domain_matches
from memtape.projections.view import MemoryView

BENCH = "projections"


# ---- recall at scale ----------------------------------------------------------------


def big_memory(n_lessons: int, n_traj: int, seed: int = 11) -> tuple[MemoryView, list[LessonEntry], list[Trajectory]]:
    """A view over `n_lessons` lessons and `n_traj` trajectories (built directly, no ledger)."""
    rng = random.Random(seed)
    state = MemoryState.empty()
    ls: LessonsState = state.lessons
    scopes = [f"d{i}.com" for i in range(5000)]
    for i in range(n_lessons):
        fc = rng.choice(COMMANDS) if rng.random() < 0.8 else None
        ep = f"{rng.choice(ERRORS)} code{rng.randrange(20000)}" if rng.random() < 0.8 else None
        scope = rng.choice(scopes) if rng.random() < 0.5 else None
        text = f"lesson {i}"
        lesson = LessonEntry(
            lesson_id=f"lsn_{i:08d}",
            lesson=text,
            category="site_specific" if scope else "error_recovery",
            failed_command=fc,
            error_pattern=ep,
            scope_domain=scope,
            use_count=rng.randrange(1, 9),
            created_at="2026-01-01T00:00:00.000000Z",
            last_used=format_ts(parse_ts("2026-01-01T00:00:00Z").replace(second=rng.randrange(60))),
            source="learned",
            triggered_domains=(),
            event_ids=(f"e{i}",),
        )
        lessons_mod._add(ls, lesson)
    hosts = [f"shop{i}.com" for i in range(10)]
    trajs = []
    for i in range(n_traj):
        host = hosts[i % len(hosts)]
        t = Trajectory(
            trajectory_id=f"t{i}",
            domain=host,
            goal=" ".join(rng.sample(VOCAB, rng.randrange(3, 7))),
            origin="",
            steps=(TrajectoryStep(command="click", verified=True),),
            recorded_at="2026-01-01T00:00:00.000000Z",
            occurred_at="2026-01-01T00:00:00.000000Z",
            duration_ms=float(rng.randrange(1000, 9000)),
            turns=1,
            run_id=None,
            event_ids=(),
        )
        state.trajectories.by_domain.setdefault(host, {})[t.trajectory_id] = t
        trajs.append(t)
    return MemoryView(state, Thresholds()), list(ls.lessons.values()), trajs


def linear_error(
    lessons: list[LessonEntry], command: str, error: str, domain: str | None, k: int = 3
) -> list[LessonEntry]:
    cmd, err = command.lower(), error.lower()
    here = [l for l in lessons if l.scope_domain is None or domain_matches(domain, l.scope_domain)]
    scored = [
        (3 + (2 if l.failed_command and l.failed_command.lower() == cmd else 0), l)
        for l in here
        if l.error_pattern and l.error_pattern.lower() in err
    ]
    if not scored:  # command-only matches, only when no pattern matches
        scored = [(2, l) for l in here if l.failed_command and l.failed_command.lower() == cmd]
    scored.sort(key=lambda x: x[1].recorded_order)
    scored.sort(key=lambda x: (x[0], x[1].use_count, x[1].last_used), reverse=True)
    return [l for _, l in scored[:k]]


def linear_domain(lessons: list[LessonEntry], domain: str, k: int = 3) -> list[LessonEntry]:
    hits = sorted((l for l in lessons if domain_matches(domain, l.scope_domain)), key=lambda l: l.recorded_order)
    hits.sort(key=lambda l: ((l.scope_domain or "").lower() == domain.lower(), l.use_count, l.last_used), reverse=True)
    return hits[:k]


def linear_traj(trajs: list[Trajectory], goal: str, domain: str, now: str, policy: Thresholds) -> Any:
    m = rank([t for t in trajs if t.domain == domain], goal, now, policy)
    return m[0] if m else None


def latencies(fn: Callable[[Any], Any], queries: list[Any]) -> tuple[float, float]:
    """p50 and p99 in microseconds (the big prebuilt memory is frozen out of the GC first)."""
    gc.collect()
    gc.freeze()
    out = []
    for q in queries:
        t0 = time.perf_counter_ns()
        fn(q)
        out.append((time.perf_counter_ns() - t0) / 1000)
    out.sort()
    return statistics.median(out), out[min(len(out) - 1, int(len(out) * 0.99))]


def recall_figures(n_lessons: int, n_traj: int, n_queries: int) -> list[Figure]:
    rng = random.Random(3)
    view, lessons, trajs = big_memory(n_lessons, n_traj)
    t0 = time.perf_counter()
    view.recall_on_error("click", "warm up")  # builds the lesson index
    build_ms = (time.perf_counter() - t0) * 1e3
    err_q = []
    for _ in range(n_queries):
        base = rng.choice(lessons)
        pattern = base.error_pattern or rng.choice(ERRORS)
        err_q.append(
            (
                rng.choice(COMMANDS),
                f"Error: {pattern.upper()} while running step {rng.randrange(99)}",
                rng.choice([None, f"www.{base.scope_domain}" if base.scope_domain else "x.org"]),
            )
        )
    dom_q = [f"www.d{rng.randrange(5000)}.com" for _ in range(n_queries)]
    now = "2026-01-10T00:00:00.000000Z"
    traj_q = [
        (" ".join(rng.sample(VOCAB, 4)) if i % 2 else rng.choice(trajs).goal, f"shop{rng.randrange(10)}.com")
        for i in range(n_queries)
    ]
    for q in err_q[:200]:
        assert view.recall_on_error(*q) == linear_error(lessons, *q), q
    for q in dom_q[:200]:
        assert view.recall_on_domain(q) == linear_domain(lessons, q), q
    for g, d in traj_q[:100]:
        assert view.match_trajectory(g, d, now) == linear_traj(trajs, g, d, now, view.policy)
    figs = []
    note = f"{n_lessons:,} lessons, index built in {build_ms:.0f} ms; aim p99 < 1 ms"
    for label, fast, slow, qs in (
        ("recall on error", lambda q: view.recall_on_error(*q), lambda q: linear_error(lessons, *q), err_q),
        ("recall on domain", lambda q: view.recall_on_domain(q), lambda q: linear_domain(lessons, q), dom_q),
        (
            "trajectory match",
            lambda q: view.match_trajectory(q[0], q[1], now),
            lambda q: linear_traj(trajs, q[0], q[1], now, view.policy),
            traj_q,
        ),
    ):
        p50, p99 = latencies(fast, qs)
        b50, b99 = latencies(slow, qs[: max(50, len(qs) // 10)])
        n_note = note if label != "trajectory match" else f"{n_traj:,} trajectories on 10 hosts; aim p99 < 1 ms"
        figs.append(
            Figure(
                BENCH, f"{label} p50", p50, "µs", "linear scan p50", b50, higher_is_better=False, aim=10.0, note=n_note
            )
        )
        figs.append(
            Figure(
                BENCH,
                f"{label} p99",
                p99,
                "µs",
                "linear scan p99",
                b99,
                higher_is_better=False,
                aim=10.0,
                note=f"p99 < 1 ms: {'yes' if p99 < 1000 else 'NO'}",
            )
        )
    return figs


# ---- rebuild and as-of ----------------------------------------------------------------


def raw_scan(path: Path) -> int:
    """The baseline a rebuild is held to: sqlite3 reading every row, orjson decoding every payload."""
    conn = sqlite3.connect(path)
    try:
        n = 0
        loads = orjson.loads
        for row in conn.execute(
            "SELECT seq, type, run_id, step, domain, occurred_at, payload FROM events ORDER BY seq"
        ):
            loads(row[6])
            n += 1
        return n
    finally:
        conn.close()


def verified_scan(path: Path) -> int:
    """The floor of the ledger's verified read: sqlite3 reading every column, orjson decoding every
    payload and the chain rule (`chain_hash`: each row re-encoded, sha256) run over every row —
    no link compared, no event built."""
    conn = sqlite3.connect(path)
    try:
        n = 0
        loads = orjson.loads
        for row in conn.execute(f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY seq"):
            loads(row[11])
            chain_hash(row[12], row[:13])
            n += 1
        return n
    finally:
        conn.close()


def read_and_folds(store: SqliteStore) -> tuple[float, float, dict[str, float]]:
    """Seconds the ledger's verified read takes (every event read, its link and hash checked),
    seconds the folds take over every event already read into memory: what a rebuild costs at the
    least, whatever it does about writing; and each projection's seconds folded alone over the
    same events (where the folds' time goes)."""
    with collector_paused():
        t0 = time.perf_counter()
        events = list(store.read())
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        fold(MemoryState.empty(), events, Thresholds())
        t_folds = time.perf_counter() - t0
        alone = {}
        for name in PROJECTIONS:
            t0 = time.perf_counter()
            fold(MemoryState.empty((name,)), events, Thresholds(), names=(name,))
            alone[name] = time.perf_counter() - t0
        return t_read, t_folds, alone


def keyed_lookups(store: SqliteStore, head: int, rng: random.Random) -> list[tuple[str, str | None, str | None]]:
    """(projection, field, key) as an agent or an audit asks them: Tier 1 and one lesson, one
    domain's facts, sessions, selectors and trajectories, one run."""
    ev = next(iter(store.read(rng.randrange(1, head), types=["step_recorded"])), None)
    run_id, domain = (ev.run_id, ev.domain) if ev is not None else ("run1", "www.site1.com")
    return [
        ("lessons", None, None),
        ("knowledge", "current", domain),
        ("sessions", "by_domain", domain),
        ("selectors", "by_domain", domain),
        ("trajectories", "by_domain", domain),
        ("runs", "runs", run_id),
    ]


def p99(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * 0.99))]


def rebuild_figures(n: int, points: int) -> tuple[list[Figure], dict[str, Any]]:
    figs = []
    with tempfile.TemporaryDirectory(prefix="memtape-bench-") as d:
        tmp = Path(d)
        t0 = time.perf_counter()
        store = build_ledger(tmp / "ledger.db", n)
        gen_s = time.perf_counter() - t0
        head = store.head()
        gc.collect()
        t0 = time.perf_counter()
        scanned = raw_scan(tmp / "ledger.db")
        t_scan = time.perf_counter() - t0
        assert scanned == head
        t0 = time.perf_counter()
        assert verified_scan(tmp / "ledger.db") == head
        t_floor = time.perf_counter() - t0
        t_read, t_folds, alone = read_and_folds(store)
        shares = sorted(alone.items(), key=lambda kv: -kv[1])
        path = tmp / "projections.db"
        t0 = time.perf_counter()
        state = rebuild(store, path)
        t_rebuild = time.perf_counter() - t0
        for db in (path, store.path):  # sizes with their WAL folded in
            with sqlite3.connect(db) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db_bytes = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
        ledger_bytes = sum(p.stat().st_size for p in (store.path, Path(f"{store.path}-wal")) if p.exists())
        figs.append(
            Figure(
                BENCH,
                f"rebuild projections.db ({head:,} events)",
                head / t_rebuild,
                "events/s",
                "raw scan+decode (sqlite3 + orjson)",
                head / t_scan,
                aim=0.5,
                note=f"ledger built in {gen_s:.0f} s; {len(state.lessons.lessons):,} lessons",
            )
        )
        figs.append(
            Figure(
                BENCH,
                "the ledger's verified read alone (every link and hash checked)",
                head / t_read,
                "events/s",
                "raw scan+decode (sqlite3 + orjson)",
                head / t_scan,
                note="what every read of the log costs: a rebuild reads this way",
            )
        )
        figs.append(
            Figure(
                BENCH,
                "the ledger's verified read, against its own floor",
                head / t_read,
                "events/s",
                "sqlite3 reading every column + orjson + the chain rule's sha256 (no check, no event built)",
                head / t_floor,
                note=f"the floor itself runs at {t_scan / t_floor:.2f}x the raw scan+decode",
            )
        )
        figs.append(
            Figure(
                BENCH,
                f"the {len(FOLDS)} folds alone, over events already read into memory",
                head / t_folds,
                "events/s",
                "raw scan+decode (sqlite3 + orjson)",
                head / t_scan,
                note="no read, no verification, no versions written; each projection folded alone: "
                + ", ".join(f"{name} {1e6 * t / head:.2f}" for name, t in shares[:6])
                + " µs an event",
            )
        )
        figs.append(
            Figure(
                BENCH,
                "verified read + the folds (a rebuild's ceiling)",
                head / (t_read + t_folds),
                "events/s",
                "raw scan+decode (sqlite3 + orjson)",
                head / t_scan,
                note=f"a rebuild cannot be faster; the rebuild above reaches "
                f"{(t_read + t_folds) / t_rebuild:.0%} of it",
            )
        )
        figs.append(
            Figure(
                BENCH,
                "projections.db size",
                db_bytes / 1e6,
                "MB",
                "the ledger file",
                ledger_bytes / 1e6,
                higher_is_better=False,
                aim=2.0,
                note="aim ≤ 0.5x the ledger",
            )
        )
        del state
        gc.collect()
        t0 = time.perf_counter()
        v = MemoryView.open(store, path)
        v.tier1()
        v.recall_on_domain("www.site1.com")
        t_open = time.perf_counter() - t0
        figs.append(
            Figure(
                BENCH,
                "open the current view + tier 1 + recall on domain",
                t_open * 1e3,
                "ms",
                "full rebuild",
                t_rebuild * 1e3,
                higher_is_better=False,
            )
        )
        os.utime(path)  # touched (not a byte changed): checked whole before anything in it is served
        t0 = time.perf_counter()
        MemoryView.open(store, path)
        t_check = time.perf_counter() - t0
        figs.append(
            Figure(
                BENCH,
                "open the current view of a touched projections.db (checked whole)",
                t_check * 1e3,
                "ms",
                "full rebuild",
                t_rebuild * 1e3,
                higher_is_better=False,
                note="every table hashed against the digest its checkpoint seals, once: its stamp is then sealed again",
            )
        )
        rng = random.Random(5)
        seqs = [rng.randrange(1, head) for _ in range(points)]
        keyed: list[float] = []
        with indexed_memory(store, path) as memory:
            for s in seqs:
                for name, field, key in keyed_lookups(store, head, rng):
                    t0 = time.perf_counter()
                    if field is None:
                        memory.at(s, None)
                    else:
                        memory.projection(name, s, field, key)
                    keyed.append((time.perf_counter() - t0) * 1e3)
        few = seqs[:3]
        base = []
        for s in few:
            t0 = time.perf_counter()
            fold(MemoryState.empty(), store.read(1, s), Thresholds())
            base.append((time.perf_counter() - t0) * 1e3)
        figs.append(
            Figure(
                BENCH,
                "as-of by index: one projection's items at a random seq, p99",
                p99(keyed),
                "ms",
                "fold everything from seq 1",
                statistics.median(base),
                higher_is_better=False,
                note=f"{points} seqs x Tier 1, a domain's facts, sessions, selectors, trajectories, a run; "
                f"p50 {statistics.median(keyed):.1f} ms; aim p99 < 50 ms",
            )
        )
        whole: dict[str, list[float]] = {}
        floor: dict[str, list[float]] = {}  # the same answer decoded from one JSON document
        items: dict[str, int] = {}
        for name in PROJECTIONS:  # the fingerprints (read once a process) are not what is measured
            projection_at(store, path, Thresholds(), name, head)
        for s in seqs[: max(3, points // 5)]:
            for name in PROJECTIONS:
                t0 = time.perf_counter()
                got = projection_at(store, path, Thresholds(), name, s)
                whole.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
                raw = encode(got)
                with collector_paused():
                    t0 = time.perf_counter()
                    decode(name, raw)
                    floor.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
                items[name] = max(items.get(name, 0), sum(len(rows) for rows in FOLDS[name].tables(got).values()))
        calls = [(name, t, f) for name in whole for t, f in zip(whole[name], floor[name])]
        within = [c for c in calls if c[1] <= 3 * c[2]]
        over = [c for c in calls if c[1] > 3 * c[2]]
        ratio = {name: max(t / max(f, 1e-6) for n, t, f in calls if n == name) for name in whole}
        figs.append(
            Figure(
                BENCH,
                "as-of: whole projections within 3x of their floor",
                len(within),
                "calls",
                "calls",
                len(calls),
                aim=1.0,
                note="floor: the same answer decoded from one JSON document; worst ratio by projection: "
                + ", ".join(f"{k} {v:.1f}x" for k, v in ratio.items())
                + (
                    f"; the {len(over)} over it take at most {max(t for _, t, _ in over):.1f} ms "
                    f"(floors up to {max(f for _, _, f in over):.2f} ms: opening projections.db "
                    f"costs more than decoding a state that small)"
                    if over
                    else ""
                ),
            )
        )
        slowest = max(whole, key=lambda k: p99(whole[k]))
        figs.append(
            Figure(
                BENCH,
                "as-of: a whole projection at a random seq, p99",
                p99([x for v in whole.values() for x in v]),
                "ms",
                "fold everything from seq 1",
                statistics.median(base),
                higher_is_better=False,
                note="p99 by projection: "
                + ", ".join(f"{k} {p99(v):.0f}" for k, v in whole.items())
                + f"; aim p99 < 50 ms; {slowest}: up to {items[slowest]:,} items",
            )
        )
        figs.append(
            Figure(
                BENCH,
                f"as-of: {slowest} (the slowest) at a random seq, p99",
                p99(whole[slowest]),
                "ms",
                "its answer decoded from one JSON document (no index: the floor of building it)",
                p99(floor[slowest]),
                higher_is_better=False,
                aim=1 / 3,
                note=f"{1e3 * p99(whole[slowest]) / max(1, items[slowest]):.1f} µs an item, floor "
                f"{1e3 * p99(floor[slowest]) / max(1, items[slowest]):.1f}",
            )
        )
        audit, t_audit = audit_figure(store)
        figs.append(audit)
        explain, t_explain = explain_figure(store)
        figs.append(explain)
        store.close()
    metrics = {
        "events": head,
        "rebuild_events_per_s": round(head / t_rebuild),
        "raw_scan_events_per_s": round(head / t_scan),
        "folds_alone_events_per_s": round(head / t_folds),
        "verified_read_events_per_s": round(head / t_read),
        "verified_read_floor_events_per_s": round(head / t_floor),
        "fold_alone_us_per_event": {name: round(1e6 * t / head, 3) for name, t in shares},
        "read_and_folds_events_per_s": round(head / (t_read + t_folds)),
        "asof_whole_within_3x": [len(within), len(calls)],
        "asof_p99_ms": round(p99(keyed), 2),
        "asof_p50_ms": round(statistics.median(keyed), 2),
        "asof_whole_projection_p99_ms": {k: round(p99(v), 1) for k, v in whole.items()},
        "asof_whole_projection_floor_p99_ms": {k: round(p99(v), 1) for k, v in floor.items()},
        "asof_whole_projection_items": items,
        "checked_whole_ms": round(t_check * 1e3, 1),
        "audit_ms": round(t_audit * 1e3, 1),
        "explain_ms": round(t_explain * 1e3, 1),
        "projections_db_bytes": db_bytes,
        "ledger_bytes": ledger_bytes,
    }
    return figs, metrics


def audit_figure(store: SqliteStore) -> tuple[Figure, float]:
    """`memtape audit` of the last run in the log through the library: memory read from the
    validity intervals vs folded from seq 1 (the answers checked equal); the median of 3."""
    from memtape.analytics.audit import audit_run

    last = store.head()
    run_id = next(ev.run_id for ev in store.read(max(1, last - 200), last) if ev.run_id)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fast = audit_run(store, run_id)
        times.append(time.perf_counter() - t0)
    t_fast = statistics.median(times)
    t0 = time.perf_counter()
    slow = audit_run(store, run_id, indexed=False)
    t_slow = time.perf_counter() - t0
    assert fast == slow
    return Figure(
        BENCH,
        f"audit of a run at the end of the log ({len(fast['steps'])} steps)",
        t_fast * 1e3,
        "ms",
        "audit folding memory from seq 1",
        t_slow * 1e3,
        higher_is_better=False,
        note="aim < 100 ms",
    ), t_fast


def explain_figure(store: SqliteStore) -> tuple[Figure, float]:
    """`memtape explain` of the most deduplicated lesson through the library: its life found by
    projections.db's index of mentions vs by reading every lesson event (answers checked equal);
    the median of 3."""
    from memtape.analytics.explain import explain_item

    uses: dict[str, int] = {}
    for ev in store.read(types=["lesson_deduplicated"]):
        uses[ev.data["lesson_id"]] = uses.get(ev.data["lesson_id"], 0) + 1
    lesson_id = (
        max(sorted(uses), key=lambda lid: uses[lid])
        if uses
        else next(ev.data["lesson_id"] for ev in store.read(types=["lesson_recorded"]))
    )
    path = store.path.with_name("projections.db")
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fast = explain_item(store, lesson_id, projections_path=path)
        times.append(time.perf_counter() - t0)
    t_fast = statistics.median(times)
    t0 = time.perf_counter()
    slow = explain_item(store, lesson_id)
    t_slow = time.perf_counter() - t0
    assert fast == slow
    return Figure(
        BENCH,
        f"explain of a lesson ({len(fast['life'])} events in its life)",
        t_fast * 1e3,
        "ms",
        "explain folding the log and reading every lesson event",
        t_slow * 1e3,
        higher_is_better=False,
        note="its life by the index of mentions",
    ), t_fast


def measure(
    quick: bool = False, events: int | None = None, lessons: int | None = None, trajectories: int | None = None
) -> tuple[list[Figure], dict[str, Any]]:
    n = events or (20_000 if quick else 1_000_000)
    figs, metrics = rebuild_figures(n, 10 if quick else 100)
    figs += recall_figures(lessons or 100_000, trajectories or 10_000, 500 if quick else 3000)
    return figs, metrics


def run(
    quick: bool = False, events: int | None = None, lessons: int | None = None, trajectories: int | None = None
) -> list[Figure]:
    return measure(quick, events, lessons, trajectories)[0]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--events", type=int, default=None, help="synthetic events (default 1,000,000; 20,000 with --quick)"
    )
    ap.add_argument("--lessons", type=int, default=None, help="lessons for the recall figures (default 100,000)")
    ap.add_argument("--trajectories", type=int, default=None, help="trajectories (default 10,000)")
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = ap.parse_args(argv)
    figs, metrics = measure(quick=args.quick, events=args.events, lessons=args.lessons, trajectories=args.trajectories)
    if args.json:
        print_json(figs, **metrics)
    else:
        show("projections: rebuild, as-of, recall", figs)


if __name__ == "__main__":
    main()
