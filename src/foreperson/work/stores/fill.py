"""A store as a deployment leaves it after months of nightly jobs, written fast through
the store's own schema (plain SQL inserts of every column, the same indexes and
triggers), for benchmarks and tests of what history costs (``foreperson.testing``).

Each night is one run (``night-00042``) of tickets of three linked tasks (classify ->
draft -> triage, the ticket job's shape), done by one worker (``worker-00042``), about
one in a hundred triage tasks DEAD after its attempts, plus durable agent runs with
their journal steps. The aggregates (counts, per-worker totals, a week of history) are
then computed from the records by the store's own backfill, as a migration would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "FillPlan", "fill_history"]

KINDS = ("classify", "draft", "triage")


@dataclass(frozen=True)
class FillPlan:
    """What to write.

    Attributes:
        tasks: finished tasks in all (a multiple of three is kept).
        per_night: tasks per night (one run, one worker name).
        dead_every: one triage task in this many is DEAD.
        agent_runs_per_night: durable agent runs per night (completed, with steps).
        steps_per_run: journal steps per agent run.
        effects: side-effect records (one per triage task, the first ones).
        tombstones: tombstones of tasks an earlier prune removed.
        end: epoch seconds the last night ends before (default: the store's clock now
            minus an hour).
    """

    tasks: int
    per_night: int = 3000
    dead_every: int = 33
    agent_runs_per_night: int = 2
    steps_per_run: int = 10
    effects: int = 0
    tombstones: int = 0
    end: float | None = None

    @property
    def nights(self) -> int:
        """Nights the tasks span."""
        return max(1, -(-self.tasks // self.per_night))


def fill_history(store: Any, plan: FillPlan) -> FillPlan:
    """Write ``plan``'s history into ``store`` (a :class:`SqliteStore` or
    :class:`PostgresStore`, at the current schema), then its aggregates.

    Returns:
        the plan.

    Raises:
        TypeError: another kind of store.
    """
    from .sqlite import SqliteStore

    end = plan.end if plan.end is not None else store.clock.now() - 3600.0
    if isinstance(store, SqliteStore):
        _fill_sqlite(store, plan, end)
        return plan
    from .postgres import PostgresStore

    if isinstance(store, PostgresStore):
        _fill_postgres(store, plan, end)
        return plan
    raise TypeError(f"fill_history fills SQLite and PostgreSQL stores, not {store!r}")


def _params(plan: FillPlan, end: float) -> dict[str, Any]:
    tickets = max(1, plan.tasks // 3)
    return {"tickets": tickets, "per_night": max(1, plan.per_night // 3),
            "nights": -(-tickets // max(1, plan.per_night // 3)), "end": end,
            "dead_every": plan.dead_every, "runs": plan.agent_runs_per_night,
            "steps": plan.steps_per_run, "effects": plan.effects,
            "tombstones": plan.tombstones}


# SQLite: ticket g (0 .. tickets-1) of night g / per_night; night 0 is the oldest, each
# starts at end - (nights - night) days and takes a second per ten tickets.
_SQLITE_TASKS = """
WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n + 1 < :tickets),
t AS (SELECT n, n / :per_night AS night,
             :end - (:nights - n / :per_night) * 86400.0 + (n % :per_night) / 10.0 AS at,
             n % :dead_every = :dead_every - 1 AS dead FROM g),
k(i, kind) AS (VALUES (0, 'classify'), (1, 'draft'), (2, 'triage'))
INSERT INTO tasks (id, kind, payload, status, assigned_to, attempts, max_attempts, result,
                   error, heartbeat_at, depends_on, locks, created_at, started_at,
                   finished_at, not_before, estimate_s, errors, lease_token, run_id,
                   parent_id, reason, stale_after, lease_expires_at, awaited, trace_context)
SELECT printf('T%08d/%s', t.n, k.kind), k.kind,
       json_object('ticket_id', printf('T%08d', t.n), 'subject', 'Invoice question',
                   'body', 'Hello, I was charged twice for my subscription this month.'),
       CASE WHEN t.dead AND k.i = 2 THEN 'dead' ELSE 'completed' END,
       printf('worker-%05d', t.night), CASE WHEN t.dead AND k.i = 2 THEN 3 ELSE 1 END, 3,
       CASE WHEN t.dead AND k.i = 2 THEN NULL
            ELSE json_object('category', 'Billing', 'confidence', 0.93) END,
       CASE WHEN t.dead AND k.i = 2 THEN 'TimeoutError: model did not answer' END,
       t.at + k.i + 0.4,
       CASE WHEN k.i = 0 THEN '[]'
            ELSE json_array(printf('T%08d/%s', t.n,
                                   CASE k.i WHEN 1 THEN 'classify' ELSE 'draft' END)) END,
       '[]', t.at, t.at + k.i + 0.1, t.at + k.i + 0.5, NULL, NULL,
       CASE WHEN t.dead AND k.i = 2 THEN json_array(json_object('attempt', 3,
            'error', 'TimeoutError: model did not answer', 'at', '2026-01-01T00:00:00+00:00',
            'worker', printf('worker-%05d', t.night))) ELSE '[]' END,
       NULL, printf('night-%05d', t.night), NULL,
       CASE WHEN t.dead AND k.i = 2 THEN 'retries_exhausted' END, NULL, NULL, k.i = 2, NULL
FROM t, k ORDER BY t.n, k.i
"""

_SQLITE_DEPS = """
INSERT INTO task_deps (task_id, dep_id)
SELECT t.id, json_extract(t.depends_on, '$[0]') FROM tasks t
WHERE t.run_id LIKE 'night-%' AND t.depends_on != '[]'
"""

_SQLITE_RUNS = """
WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n + 1 < :nights * :runs)
INSERT INTO runs (run_id, agent, user_id, status, input, result, error, stop_reason, owner,
                  lease_expires_at, version, created_at, updated_at)
SELECT printf('agent-%07d', n), 'clerk', printf('user-%03d', n % 50), 'completed',
       json_object('text', 'Where is my order?'), json_object('text', 'It ships today.'),
       NULL, 'completed', NULL, NULL, 1,
       :end - (:nights - n / :runs) * 86400.0 + 600 + n % :runs,
       :end - (:nights - n / :runs) * 86400.0 + 610 + n % :runs FROM g
"""

_SQLITE_STEPS = """
WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n + 1 < :steps)
INSERT INTO steps (run_id, key, kind, version, digest, result, created_at, request)
SELECT r.run_id, printf('model/%d', g.n), 'model', 1, 'digest',
       json_object('text', 'a step of the journal'), r.created_at + g.n, NULL
FROM runs r, g WHERE r.run_id LIKE 'agent-%'
"""


_SQLITE_EFFECTS = """
INSERT INTO effects (key, task_id, created_at, lease_token, state)
SELECT 'send-reply:' || id, id, finished_at, 'token', 'done' FROM tasks
WHERE kind = 'triage' AND run_id LIKE 'night-%' ORDER BY seq LIMIT :effects
"""

_SQLITE_TOMBSTONES = """
WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n + 1 < :tombstones)
INSERT INTO pruned_tasks (id, run_id, pruned_at)
SELECT printf('gone-%08d', n), 'night-old', :end - 400 * 86400.0 + n FROM g
WHERE :tombstones > 0
"""


def _fill_sqlite(store: Any, plan: FillPlan, end: float) -> None:
    from ._sqlite_schema import MIGRATIONS, statements

    params = _params(plan, end)
    backfill = [s for s in statements(MIGRATIONS[4]) if s.startswith("INSERT INTO")]
    with store._tx() as db:
        for sql in (_SQLITE_TASKS, _SQLITE_DEPS, _SQLITE_RUNS, _SQLITE_STEPS,
                    _SQLITE_EFFECTS, _SQLITE_TOMBSTONES):
            db.execute(sql, {k: v for k, v in params.items() if f":{k}" in sql})
        for table in ("task_counts", "worker_counts", "task_history"):
            db.execute(f"DELETE FROM {table}")
        for sql in backfill:
            if not sql.startswith("INSERT INTO clock"):
                db.execute(sql)
    store._read("ANALYZE")


_PG_TASKS = """
INSERT INTO tasks (id, kind, payload, status, assigned_to, attempts, max_attempts, result,
                   error, heartbeat_at, depends_on, locks, created_at, started_at,
                   finished_at, errors, run_id, reason, awaited)
SELECT format('T%%s/%%s', lpad(g::text, 8, '0'), k.kind), k.kind,
       jsonb_build_object('ticket_id', format('T%%s', lpad(g::text, 8, '0')),
                          'subject', 'Invoice question',
                          'body', 'Hello, I was charged twice for my subscription this month.'),
       CASE WHEN d.dead AND k.i = 2 THEN 'dead' ELSE 'completed' END,
       format('worker-%%s', lpad((g / %(per_night)s)::text, 5, '0')),
       CASE WHEN d.dead AND k.i = 2 THEN 3 ELSE 1 END, 3,
       CASE WHEN d.dead AND k.i = 2 THEN NULL
            ELSE jsonb_build_object('category', 'Billing', 'confidence', 0.93) END,
       CASE WHEN d.dead AND k.i = 2 THEN 'TimeoutError: model did not answer' END,
       a.at + make_interval(secs => k.i + 0.4),
       CASE WHEN k.i = 0 THEN '{}'::text[]
            ELSE ARRAY[format('T%%s/%%s', lpad(g::text, 8, '0'),
                              CASE k.i WHEN 1 THEN 'classify' ELSE 'draft' END)] END,
       '{}', a.at, a.at + make_interval(secs => k.i + 0.1),
       a.at + make_interval(secs => k.i + 0.5),
       CASE WHEN d.dead AND k.i = 2 THEN jsonb_build_array(jsonb_build_object(
            'attempt', 3, 'error', 'TimeoutError: model did not answer',
            'at', '2026-01-01T00:00:00+00:00',
            'worker', format('worker-%%s', lpad((g / %(per_night)s)::text, 5, '0'))))
            ELSE '[]'::jsonb END,
       format('night-%%s', lpad((g / %(per_night)s)::text, 5, '0')),
       CASE WHEN d.dead AND k.i = 2 THEN 'retries_exhausted' END, k.i = 2
FROM generate_series(0, %(tickets)s - 1) AS g,
     LATERAL (SELECT to_timestamp(%(end)s - (%(nights)s - g / %(per_night)s) * 86400.0
                                  + (g %% %(per_night)s) / 10.0) AS at) a,
     LATERAL (SELECT g %% %(dead_every)s = %(dead_every)s - 1 AS dead) d,
     (VALUES (0, 'classify'), (1, 'draft'), (2, 'triage')) AS k(i, kind)
ORDER BY g, k.i
"""

_PG_DEPS = """
INSERT INTO task_deps (task_id, dep_id)
SELECT id, depends_on[1] FROM tasks WHERE run_id LIKE 'night-%%' AND depends_on <> '{}'
"""

_PG_RUNS = """
INSERT INTO runs (run_id, agent, user_id, status, input, result, stop_reason, version,
                  created_at, updated_at)
SELECT format('agent-%%s', lpad(n::text, 7, '0')), 'clerk',
       format('user-%%s', lpad((n %% 50)::text, 3, '0')), 'completed',
       '{"text": "Where is my order?"}', '{"text": "It ships today."}', 'completed', 1,
       to_timestamp(%(end)s - (%(nights)s - n / %(runs)s) * 86400.0 + 600 + n %% %(runs)s),
       to_timestamp(%(end)s - (%(nights)s - n / %(runs)s) * 86400.0 + 610 + n %% %(runs)s)
FROM generate_series(0, %(nights)s * %(runs)s - 1) AS n
"""

_PG_STEPS = """
INSERT INTO steps (run_id, key, kind, version, digest, result, created_at)
SELECT r.run_id, format('model/%%s', g), 'model', 1, 'digest',
       '{"text": "a step of the journal"}', r.created_at + make_interval(secs => g)
FROM runs r, generate_series(0, %(steps)s - 1) AS g WHERE r.run_id LIKE 'agent-%%'
"""


_PG_EFFECTS = """
INSERT INTO effects (key, task_id, lease_token, created_at, state)
SELECT 'send-reply:' || id, id, 'token', finished_at, 'done' FROM tasks
WHERE kind = 'triage' AND run_id LIKE 'night-%%' ORDER BY seq LIMIT %(effects)s
"""

_PG_TOMBSTONES = """
INSERT INTO pruned_tasks (id, run_id, pruned_at)
SELECT format('gone-%%s', lpad(n::text, 8, '0')), 'night-old',
       to_timestamp(%(end)s - 400 * 86400.0 + n)
FROM generate_series(0, %(tombstones)s - 1) AS n
"""


def _fill_postgres(store: Any, plan: FillPlan, end: float) -> None:
    from ._pg_migrate import _backfill_aggregates

    params = _params(plan, end)
    with store._pool.connection() as conn:
        with conn.transaction():
            for sql in (_PG_TASKS, _PG_DEPS, _PG_RUNS, _PG_STEPS, _PG_EFFECTS,
                        _PG_TOMBSTONES):
                conn.execute(sql, params)
        _backfill_aggregates(conn, store.schema)
        for table in ("tasks", "task_deps", "runs", "steps", "effects", "pruned_tasks",
                      "task_counts", "task_history", "worker_counts"):
            conn.execute(f"ANALYZE {table}")

