"""The PostgreSQL schema of :class:`~foreperson.work.stores.postgres.PostgresStore`, as data.

Two ways to reach the current version, which a test keeps equal:

* ``MIGRATIONS[i]`` brings a schema from version ``i`` to ``i + 1`` (frozen once
  released: a change is a new migration, never an edit);
* ``FRESH`` installs the current version in one go (what a new database gets).

Every object lives in one PostgreSQL schema (``foreperson`` unless told otherwise); the
store's connections put that schema first on ``search_path``, so the SQL below names
tables without a schema. ``schema_migrations`` records which versions were applied.

Objects:

``tasks``
    one row per :class:`~foreperson.work.task.Task`, same column names as its fields.
``task_deps``
    one row per dependency edge, for readiness and parking.
``lock_slots``
    one row per slot of a named resource: ``(name, slot)`` is the primary key, and a
    claim takes a free slot with ``FOR UPDATE SKIP LOCKED``, so at most ``max_active``
    tasks (1 for a plain lock) hold a resource, across every machine.
``limits`` (version 2)
    per-resource settings: ``max_active`` concurrent holders, and a token bucket
    (``rate_per_s``, ``burst``) kept as one timestamp, ``tat`` (the generic cell rate
    algorithm's theoretical arrival time). ``kind:<kind>`` rows limit a whole kind.
``effects``
    side effects claimed once per key (``TaskContext.once``).
``workers`` (version 2)
    worker processes and their last heartbeat, for ``foreperson status``; the host and
    pid of the process running each (version 5).
``steps`` (version 3)
    the step journal (:class:`foreperson.journal.Journal`): one row per journaled step
    of a run, keyed by ``(run_id, key)``, first write wins.
``runs`` (version 4)
    durable runs (:class:`foreperson.journal.RunLedger`, ``foreperson.runtime``): the
    user a run belongs to, the process that owns it now and its lease, how it ended.
    ``steps.request`` (version 4) keeps each step's request summary, so a divergent
    replay can say how it differs.
``tasks.trace_context`` (version 5)
    the OpenTelemetry context a task was created under (a W3C ``traceparent`` carrier),
    so its execution span joins that trace in whichever process runs it.
``fp_now(p)`` (version 3)
    the clock of every statement: ``p`` (a test's fake time) or the server's
    ``statement_timestamp()``.
``claim_tasks(...)``
    the claim: one statement that picks ready tasks ``FOR UPDATE SKIP LOCKED``, takes
    their lock slots and rate tokens, counts the attempt and draws a lease token.
``task_counts``, ``task_history``, ``worker_counts``, ``task_deltas`` (version 6)
    aggregates of the finished work, for monitoring at the cost of what it shows:
    statement triggers append each statement's changes to ``task_deltas``;
    ``fold_task_deltas()`` moves them into COMPLETED and DEAD tasks per kind (with the
    COMPLETED ones' run time), the net change per second of the unfinished, COMPLETED
    and DEAD counts, and per worker what it completed and failed.
``pruned_tasks`` (version 6)
    a tombstone per task removed by retention, so an id added again is refused.

Notifications: inserting tasks, a task going back to PENDING, a slot being freed and a
task with dependents completing each ``pg_notify`` the channel ``<schema>.ready`` with
the kind (or kinds) concerned, so idle workers wake up instead of polling. An awaited
task (``Supervisor.submit``) that ends notifies ``<schema>.done`` with its id
(version 3), so its waiter in another process wakes at once.
"""

from __future__ import annotations

__all__ = ["DROPPED", "FRESH", "INDEXES", "LATEST", "MIGRATIONS"]

# -- version 1: the contract of every store (tasks, dependencies, locks, effects) ------

_TABLES_V1 = """
CREATE TABLE tasks (
    id           text PRIMARY KEY,
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    kind         text NOT NULL,
    payload      jsonb NOT NULL,
    status       text NOT NULL DEFAULT 'pending' CHECK (status IN
                 ('pending', 'assigned', 'running', 'completed', 'failed', 'dead')),
    assigned_to  text,
    attempts     integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL CHECK (max_attempts >= 1),
    result       jsonb,
    error        text,
    heartbeat_at timestamptz,
    depends_on   text[] NOT NULL DEFAULT '{}',
    locks        text[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL,
    started_at   timestamptz,
    finished_at  timestamptz,
    not_before   timestamptz,
    estimate_s   double precision,
    errors       jsonb NOT NULL DEFAULT '[]',
    lease_token  text
);
-- A status change is never a HOT update, so every index costs a write on every claim,
-- start and completion: keep them few and partial (an entry only while it matters).
CREATE INDEX tasks_claimable ON tasks (seq) WHERE status IN ('pending', 'failed');
CREATE INDEX tasks_claimable_kind ON tasks (kind, seq) WHERE status IN ('pending', 'failed');
CREATE INDEX tasks_active ON tasks (heartbeat_at) WHERE status IN ('assigned', 'running');
CREATE INDEX tasks_dead ON tasks (id) WHERE status = 'dead';

CREATE TABLE task_deps (
    task_id text NOT NULL,
    dep_id  text NOT NULL,
    PRIMARY KEY (task_id, dep_id)
);
CREATE INDEX task_deps_dep ON task_deps (dep_id);

CREATE TABLE lock_slots (
    name    text NOT NULL,
    slot    integer NOT NULL,
    task_id text,
    PRIMARY KEY (name, slot)
);
CREATE INDEX lock_slots_task ON lock_slots (task_id) WHERE task_id IS NOT NULL;

CREATE TABLE effects (
    key         text PRIMARY KEY,
    task_id     text NOT NULL,
    lease_token text NOT NULL,
    created_at  timestamptz NOT NULL
);
"""

# Wake-ups. The channel is "<schema>.ready"; the payload names the kinds concerned
# ('' = any). Row triggers fire only through their WHEN clause, so a plain completion
# (no dependents, no lock) costs one cheap check and sends nothing.
_NOTIFY_V1 = r"""
CREATE FUNCTION notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_kinds text;
BEGIN
    SELECT string_agg(DISTINCT kind, ',') INTO v_kinds FROM inserted;
    IF v_kinds IS NOT NULL THEN
        PERFORM pg_notify(TG_TABLE_SCHEMA || '.ready',
                          CASE WHEN length(v_kinds) < 7000 THEN v_kinds ELSE '' END);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER tasks_inserted AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION notify_inserted();

CREATE FUNCTION notify_ready() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'pending'
       OR EXISTS (SELECT 1 FROM task_deps d WHERE d.dep_id = NEW.id) THEN
        PERFORM pg_notify(TG_TABLE_SCHEMA || '.ready', '');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER tasks_ready AFTER UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status
          AND (NEW.status = 'pending' OR NEW.status = 'completed'))
    EXECUTE FUNCTION notify_ready();

CREATE FUNCTION notify_slot_freed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.ready', '');
    RETURN NULL;
END $$;
CREATE TRIGGER lock_slots_freed AFTER UPDATE OF task_id ON lock_slots
    FOR EACH ROW WHEN (OLD.task_id IS NOT NULL AND NEW.task_id IS NULL)
    EXECUTE FUNCTION notify_slot_freed();
"""

_CLAIM_V1 = r"""
CREATE FUNCTION claim_tasks(p_worker text, p_kinds text[], p_ids text[], p_limit integer,
                            p_start boolean, p_now timestamptz)
RETURNS SETOF tasks LANGUAGE plpgsql AS $$
DECLARE
    v_now   timestamptz := coalesce(p_now, statement_timestamp());
    v_ids   text[] := '{}';
    v_task  record;
    v_lock  text;
    v_slot  integer;
    v_names text[];
    v_ok    boolean;
BEGIN
    IF p_limit <= 0 THEN
        RETURN;
    END IF;
    FOR v_task IN
        SELECT t.seq, t.id, t.locks FROM tasks t
        WHERE t.status IN ('pending', 'failed')
          AND (p_kinds IS NULL OR t.kind = ANY (p_kinds))
          AND (p_ids IS NULL OR t.id = ANY (p_ids))
          AND (t.not_before IS NULL OR t.not_before <= v_now)
          AND NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p ON p.id = d.dep_id
                          WHERE d.task_id = t.id AND p.status <> 'completed')
          AND NOT EXISTS (SELECT 1 FROM unnest(t.locks) AS r(name)
                          WHERE NOT EXISTS (SELECT 1 FROM lock_slots s
                                            WHERE s.name = r.name AND s.slot = 0
                                              AND s.task_id IS NULL))
        ORDER BY t.seq
        LIMIT p_limit
        FOR UPDATE OF t SKIP LOCKED
    LOOP
        IF v_task.locks <> '{}' THEN
            v_ok := true;
            v_names := '{}';
            FOREACH v_lock IN ARRAY (SELECT array_agg(DISTINCT x ORDER BY x)
                                     FROM unnest(v_task.locks) x) LOOP
                SELECT s.slot INTO v_slot FROM lock_slots s
                WHERE s.name = v_lock AND s.slot = 0 AND s.task_id IS NULL
                FOR UPDATE SKIP LOCKED;
                IF NOT FOUND THEN
                    v_ok := false;
                    EXIT;
                END IF;
                v_names := v_names || v_lock;
            END LOOP;
            CONTINUE WHEN NOT v_ok;
            UPDATE lock_slots s SET task_id = v_task.id
            WHERE s.name = ANY (v_names) AND s.slot = 0;
        END IF;
        v_ids := v_ids || v_task.id;
    END LOOP;
    RETURN QUERY
    UPDATE tasks t SET
        status = CASE WHEN p_start THEN 'running' ELSE 'assigned' END,
        assigned_to = p_worker,
        attempts = t.attempts + 1,
        heartbeat_at = v_now,
        lease_token = replace(gen_random_uuid()::text, '-', ''),
        started_at = CASE WHEN p_start THEN v_now ELSE t.started_at END
    WHERE t.id = ANY (v_ids)
    RETURNING t.*;
END $$;
"""

_MIGRATIONS_TABLE = """
CREATE TABLE schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);
"""

# -- version 2: worker processes, concurrency and rate limits across machines ------------

_TABLES_V2 = """
CREATE TABLE workers (
    name         text PRIMARY KEY,
    kinds        text[] NOT NULL DEFAULT '{}',
    concurrency  integer NOT NULL DEFAULT 1,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);

CREATE TABLE limits (
    name        text PRIMARY KEY,
    max_active  integer CHECK (max_active IS NULL OR max_active >= 0),
    rate_per_s  double precision CHECK (rate_per_s IS NULL OR rate_per_s > 0),
    burst       integer NOT NULL DEFAULT 1 CHECK (burst >= 1),
    tat         timestamptz NOT NULL DEFAULT '-infinity'
);
"""

# The claim of version 2. A task's resources are its ``locks`` plus ``kind:<kind>`` when
# that kind has a limit. A resource without a ``limits`` row is a plain lock (one holder,
# slot 0); with a row it has ``max_active`` slots (NULL: no cap) and, with
# ``rate_per_s``, a token bucket (GCRA): a claim is allowed while
# ``tat <= now + (burst - 1) / rate`` and pushes ``tat`` by ``1 / rate``.
# Busy tasks are filtered before they are locked, so one busy resource at the head of
# the queue does not hide the tasks behind it; the loop re-checks with SKIP LOCKED.
# The candidates come from one of three queries so that each can walk an index in
# ``seq`` order and stop after ``p_limit`` rows: by ids (assign), one kind (the
# ``(kind, seq)`` index) or several kinds.
_HELPERS_V2 = r"""
CREATE FUNCTION task_resources(p_kind text, p_locks text[], p_limited text[])
RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_kind = ANY (p_limited) THEN p_locks || ('kind:' || p_kind)
                ELSE p_locks END
$$;

CREATE FUNCTION resources_busy(p_resources text[], p_now timestamptz)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF cardinality(p_resources) = 0 THEN
        RETURN false;
    END IF;
    RETURN EXISTS (
        SELECT 1 FROM unnest(p_resources) AS r(name)
        LEFT JOIN limits l ON l.name = r.name
        WHERE ((l.name IS NULL OR l.max_active IS NOT NULL)
               AND NOT EXISTS (SELECT 1 FROM lock_slots s
                               WHERE s.name = r.name AND s.task_id IS NULL
                                 AND s.slot < coalesce(l.max_active, 1)))
           OR (l.rate_per_s IS NOT NULL
               AND l.tat > p_now + make_interval(secs => (l.burst - 1) / l.rate_per_s)));
END $$;
"""

_CANDIDATES_V2 = """
        SELECT coalesce(array_agg(c.id ORDER BY c.seq), '{{}}'),
               coalesce(array_agg(c.gated ORDER BY c.seq), '{{}}')
        INTO v_cand, v_gated
        FROM (SELECT t.seq, t.id, (t.locks <> '{{}}' OR t.kind = ANY (v_limited)) AS gated
              FROM tasks t
              WHERE {which}
                AND t.status IN ('pending', 'failed')
                AND (t.not_before IS NULL OR t.not_before <= v_now)
                AND (t.depends_on = '{{}}'
                     OR NOT EXISTS (SELECT 1 FROM task_deps d JOIN tasks p ON p.id = d.dep_id
                                    WHERE d.task_id = t.id AND p.status <> 'completed'))
                AND ((t.locks = '{{}}' AND NOT t.kind = ANY (v_limited))
                     OR NOT resources_busy(task_resources(t.kind, t.locks, v_limited), v_now))
              ORDER BY t.seq
              LIMIT p_limit
              FOR UPDATE OF t SKIP LOCKED) AS c"""

_CLAIM_V2 = r"""
CREATE OR REPLACE FUNCTION claim_tasks(p_worker text, p_kinds text[], p_ids text[],
                                       p_limit integer, p_start boolean, p_now timestamptz)
RETURNS SETOF tasks LANGUAGE plpgsql AS $$
DECLARE
    v_now       timestamptz := coalesce(p_now, statement_timestamp());
    v_limited   text[];
    v_cand      text[];
    v_gated     boolean[];
    v_ids       text[] := '{}';
    v_resources text[];
    v_res       text;
    v_lim       record;
    v_slot      integer;
    v_names     text[];
    v_slots     integer[];
    v_buckets   text[];
    v_ok        boolean;
BEGIN
    IF p_limit <= 0 THEN
        RETURN;
    END IF;
    SELECT coalesce(array_agg(substr(l.name, 6)), '{}') INTO v_limited
    FROM limits l WHERE l.name LIKE 'kind:%';
    -- Candidates in one statement, locked as they are found (SKIP LOCKED: never wait
    -- for, nor take, a row another claimer holds).
    IF p_ids IS NOT NULL THEN""" + _CANDIDATES_V2.format(
    which="t.id = ANY (p_ids) AND (p_kinds IS NULL OR t.kind = ANY (p_kinds))") + r""";
    ELSIF cardinality(p_kinds) = 1 THEN""" + _CANDIDATES_V2.format(
    which="t.kind = p_kinds[1]") + r""";
    ELSE""" + _CANDIDATES_V2.format(which="t.kind = ANY (p_kinds)") + r""";
    END IF;
    IF NOT true = ANY (v_gated) THEN
        v_ids := v_cand;            -- no candidate needs a slot or a token
    ELSE
        FOR i IN 1 .. cardinality(v_cand) LOOP
            IF NOT v_gated[i] THEN
                v_ids := v_ids || v_cand[i];
                CONTINUE;
            END IF;
            SELECT task_resources(t.kind, t.locks, v_limited) INTO v_resources
            FROM tasks t WHERE t.id = v_cand[i];
            v_ok := true;
            v_names := '{}';
            v_slots := '{}';
            v_buckets := '{}';
            FOREACH v_res IN ARRAY (SELECT array_agg(DISTINCT x ORDER BY x)
                                    FROM unnest(v_resources) x) LOOP
                SELECT l.max_active, l.rate_per_s, true AS found INTO v_lim
                FROM limits l WHERE l.name = v_res;
                IF v_lim.found IS NULL OR v_lim.max_active IS NOT NULL THEN
                    SELECT s.slot INTO v_slot FROM lock_slots s
                    WHERE s.name = v_res AND s.task_id IS NULL
                      AND s.slot < coalesce(v_lim.max_active, 1)
                    ORDER BY s.slot LIMIT 1
                    FOR UPDATE SKIP LOCKED;
                    IF NOT FOUND THEN
                        v_ok := false;
                        EXIT;
                    END IF;
                    v_names := v_names || v_res;
                    v_slots := v_slots || v_slot;
                END IF;
                IF v_lim.rate_per_s IS NOT NULL THEN
                    PERFORM 1 FROM limits l
                    WHERE l.name = v_res
                      AND l.tat <= v_now + make_interval(secs => (l.burst - 1) / l.rate_per_s)
                    FOR UPDATE SKIP LOCKED;
                    IF NOT FOUND THEN
                        v_ok := false;
                        EXIT;
                    END IF;
                    v_buckets := v_buckets || v_res;
                END IF;
            END LOOP;
            CONTINUE WHEN NOT v_ok;
            UPDATE lock_slots s SET task_id = v_cand[i]
            FROM unnest(v_names, v_slots) AS u(name, slot)
            WHERE s.name = u.name AND s.slot = u.slot;
            UPDATE limits l
            SET tat = greatest(l.tat, v_now) + make_interval(secs => 1.0 / l.rate_per_s)
            WHERE l.name = ANY (v_buckets);
            v_ids := v_ids || v_cand[i];
        END LOOP;
    END IF;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE tasks t SET
        status = CASE WHEN p_start THEN 'running' ELSE 'assigned' END,
        assigned_to = p_worker,
        attempts = t.attempts + 1,
        heartbeat_at = v_now,
        lease_token = replace(gen_random_uuid()::text, '-', ''),
        started_at = CASE WHEN p_start THEN v_now ELSE t.started_at END
    WHERE t.id = ANY (v_ids)
    RETURNING t.*;
END $$;
"""

# -- version 3: runs, reason codes, per-task leases, effects at least once, the journal ---

# ``fp_now(p)``: the one clock of every statement: the server's, or a test's fake time.
_TABLES_V3 = r"""
CREATE FUNCTION fp_now(p_now timestamptz) RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT coalesce(p_now, statement_timestamp())
$$;

ALTER TABLE tasks
    ADD COLUMN run_id           text,
    ADD COLUMN parent_id        text,
    ADD COLUMN reason           text,
    ADD COLUMN stale_after      double precision CHECK (stale_after IS NULL OR stale_after > 0),
    ADD COLUMN lease_s          double precision,
    ADD COLUMN lease_expires_at timestamptz,
    ADD COLUMN awaited          boolean NOT NULL DEFAULT false;
UPDATE tasks SET reason = 'dependency_dead' WHERE status = 'dead' AND error LIKE 'dependency %';
UPDATE tasks SET lease_s = 90, lease_expires_at = heartbeat_at + interval '90 seconds'
    WHERE status IN ('assigned', 'running');
DROP INDEX tasks_active;
CREATE INDEX tasks_active ON tasks (lease_expires_at) WHERE status IN ('assigned', 'running');
CREATE INDEX tasks_run ON tasks (run_id, status) WHERE run_id IS NOT NULL;

ALTER TABLE effects ADD COLUMN state text NOT NULL DEFAULT 'done'
    CHECK (state IN ('claimed', 'done'));

CREATE TABLE steps (
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    run_id     text NOT NULL,
    key        text NOT NULL,
    kind       text NOT NULL,
    version    integer NOT NULL,
    digest     text NOT NULL,
    result     jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, key)
);

-- A waiter in another process learns that an awaited task ended (channel "<schema>.done").
CREATE FUNCTION notify_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.done', NEW.id);
    RETURN NULL;
END $$;
CREATE TRIGGER tasks_finished AFTER UPDATE OF status ON tasks
    FOR EACH ROW
    WHEN (NEW.awaited AND OLD.status IS DISTINCT FROM NEW.status
          AND NEW.status IN ('completed', 'dead'))
    EXECUTE FUNCTION notify_finished();

DROP FUNCTION claim_tasks(text, text[], text[], integer, boolean, timestamptz);
"""

# The claim of version 3: as version 2, but the first ``p_start`` tasks claimed (in
# queue order) start at once (RUNNING, the attempt counted) and the others are
# prefetched (ASSIGNED, counted later by ``start``), and the lease (``lease_s`` seconds:
# the task's own ``stale_after``, else ``p_lease``) is stored with its expiry.
_CLAIM_V3 = _CLAIM_V2.replace(
    "CREATE OR REPLACE FUNCTION claim_tasks(p_worker text, p_kinds text[], p_ids text[],\n"
    "                                       p_limit integer, p_start boolean, p_now timestamptz)",
    "CREATE FUNCTION claim_tasks(p_worker text, p_kinds text[], p_ids text[],\n"
    "                            p_limit integer, p_start integer, p_now timestamptz,\n"
    "                            p_lease double precision)").replace(
    """        attempts = t.attempts + 1,
        heartbeat_at = v_now,""",
    """        attempts = t.attempts + CASE WHEN p_start THEN 1 ELSE 0 END,
        heartbeat_at = v_now,
        lease_s = coalesce(t.stale_after, p_lease),
        lease_expires_at = v_now + make_interval(secs => coalesce(t.stale_after, p_lease)),"""
).replace("WHEN p_start THEN", "WHEN array_position(v_ids, t.id) <= p_start THEN")
assert "p_lease double precision" in _CLAIM_V3 and "<= p_start THEN" in _CLAIM_V3
assert "WHEN p_start THEN" not in _CLAIM_V3

_TABLES_V4 = """
CREATE TABLE runs (
    run_id           text PRIMARY KEY,
    seq              bigint GENERATED ALWAYS AS IDENTITY,
    agent            text NOT NULL,
    user_id          text,
    status           text NOT NULL CHECK (status IN
                         ('running', 'waiting', 'completed', 'failed', 'interrupted')),
    input            jsonb NOT NULL,
    result           jsonb,
    error            text,
    stop_reason      text,
    owner            text,
    lease_expires_at timestamptz,
    version          integer NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
CREATE INDEX runs_created ON runs (created_at, seq);
CREATE INDEX runs_user ON runs (user_id, created_at);
ALTER TABLE steps ADD COLUMN request jsonb;
"""

# -- version 5: observability: a task's trace context, the process of each worker --------

_TABLES_V5 = """
ALTER TABLE tasks ADD COLUMN trace_context jsonb;
ALTER TABLE workers ADD COLUMN host text, ADD COLUMN pid integer;
"""

# -- version 6: steady at any age ----------------------------------------------------------
#
# Aggregates of the finished work, so that monitoring reads cost the size of what they
# show: statement triggers append what each statement changed among the finished to
# ``task_deltas`` (an insert: no two transactions ever update one row, so counting adds
# no lock wait between workers), and ``fold_task_deltas()`` (every sweep, by whichever
# process gets its advisory lock first) moves them into ``task_counts`` (COMPLETED and
# DEAD tasks per kind, with the run time of the COMPLETED ones), ``task_history`` (the
# net change per second of the unfinished, COMPLETED and DEAD counts) and
# ``worker_counts``. The unfinished are counted on the partial indexes of the waiting
# and the held, a cost of the work at hand. Readers add the deltas not folded yet.
# ``pruned_tasks`` keeps a tombstone per task removed by ``prune``. Written so that
# running it twice is harmless (a migration stopped between its parts is simply run
# again).

_TABLES_V6 = r"""
CREATE TABLE IF NOT EXISTS task_counts (
    kind   text NOT NULL,
    status text NOT NULL,
    n      bigint NOT NULL DEFAULT 0,
    run_s  double precision NOT NULL DEFAULT 0,
    run_n  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, status)
);
CREATE TABLE IF NOT EXISTS task_history (
    at     bigint NOT NULL,
    status text NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (at, status)
);
CREATE TABLE IF NOT EXISTS worker_counts (
    name      text PRIMARY KEY,
    completed bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    last_at   timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS worker_counts_last ON worker_counts (last_at);
CREATE TABLE IF NOT EXISTS task_deltas (
    at     bigint NOT NULL,
    kind   text NOT NULL,
    status text NOT NULL,
    worker text,
    n      integer NOT NULL,
    run_s  double precision NOT NULL DEFAULT 0,
    run_n  integer NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS pruned_tasks (
    id        text PRIMARY KEY,
    run_id    text,
    pruned_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS pruned_tasks_at ON pruned_tasks (pruned_at);

-- the clock of the triggers: a test's fake time (set on the session), else the server's
CREATE OR REPLACE FUNCTION fp_clock() RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT coalesce(nullif(current_setting('foreperson.now', true), '')::timestamptz,
                    statement_timestamp())
$$;

CREATE OR REPLACE FUNCTION count_inserted_tasks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_deltas (at, kind, status, n)
    SELECT extract(epoch FROM fp_clock())::bigint, kind,
           CASE WHEN status IN ('completed', 'dead') THEN status ELSE 'unfinished' END,
           count(*)
    FROM new_rows GROUP BY 2, 3;
    RETURN NULL;
END $$;

-- Only what concerns the finished: a task finishing (or leaving DEAD), and a failed
-- attempt (its worker's count). Claims, starts and heartbeats leave nothing.
CREATE OR REPLACE FUNCTION count_updated_tasks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status NOT IN ('assigned', 'running')) THEN
        RETURN NULL;        -- a claim, a start, a heartbeat: nothing finished or failed
    END IF;
    WITH changed AS (
        SELECT o.kind, o.status AS was, w.status AS now, w.assigned_to, w.errors,
               o.status <> w.status AND (o.status IN ('completed', 'dead')
                                         OR w.status IN ('completed', 'dead')) AS moved,
               CASE WHEN w.status = 'completed' AND w.started_at IS NOT NULL
                         AND w.finished_at IS NOT NULL
                    THEN extract(epoch FROM w.finished_at - w.started_at) END AS run_s,
               jsonb_array_length(w.errors) > jsonb_array_length(o.errors) AS failed
        FROM old_rows o JOIN new_rows w ON w.seq = o.seq
        WHERE (o.status <> w.status AND (o.status IN ('completed', 'dead')
                                         OR w.status IN ('completed', 'dead')))
           OR o.errors IS DISTINCT FROM w.errors)
    INSERT INTO task_deltas (at, kind, status, worker, n, run_s, run_n)
    SELECT extract(epoch FROM fp_clock())::bigint, kind, status, worker, sum(n), sum(run_s),
           sum(run_n)
    FROM (SELECT kind, CASE WHEN was IN ('completed', 'dead') THEN was ELSE 'unfinished' END
                     AS status, NULL::text AS worker, -1 AS n, 0::float8 AS run_s,
                 0 AS run_n
          FROM changed WHERE moved
          UNION ALL
          SELECT kind, CASE WHEN now IN ('completed', 'dead') THEN now ELSE 'unfinished' END,
                 NULL, 1, coalesce(run_s, 0), (run_s IS NOT NULL)::int
          FROM changed WHERE moved
          UNION ALL
          SELECT kind, 'completed', assigned_to, 1, 0, 0
          FROM changed WHERE moved AND now = 'completed' AND assigned_to IS NOT NULL
          UNION ALL
          SELECT kind, 'failed', errors -> -1 ->> 'worker', 1, 0, 0
          FROM changed WHERE failed AND errors -> -1 ->> 'worker' IS NOT NULL) d
    GROUP BY kind, status, worker;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION count_deleted_tasks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO task_deltas (at, kind, status, n, run_s, run_n)
    SELECT extract(epoch FROM fp_clock())::bigint, kind, status, -count(*),
           -sum(CASE WHEN status = 'completed' AND started_at IS NOT NULL
                          AND finished_at IS NOT NULL
                     THEN extract(epoch FROM finished_at - started_at) ELSE 0 END),
           -count(*) FILTER (WHERE status = 'completed' AND started_at IS NOT NULL
                                   AND finished_at IS NOT NULL)
    FROM old_rows WHERE status IN ('completed', 'dead') GROUP BY kind, status;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS tasks_counted_insert ON tasks;
CREATE TRIGGER tasks_counted_insert AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_inserted_tasks();
DROP TRIGGER IF EXISTS tasks_counted_update ON tasks;
CREATE TRIGGER tasks_counted_update AFTER UPDATE ON tasks
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_updated_tasks();
DROP TRIGGER IF EXISTS tasks_counted_delete ON tasks;
CREATE TRIGGER tasks_counted_delete AFTER DELETE ON tasks
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION count_deleted_tasks();

-- Move the deltas into the aggregates; 0 when another process is doing it. Rows are
-- upserted in key order, and only here, so two folds could never deadlock anyway.
CREATE OR REPLACE FUNCTION fold_task_deltas() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_n bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtext(current_schema() || '.fold_task_deltas')) THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM task_deltas RETURNING *
    ), counted AS (
        INSERT INTO task_counts AS c (kind, status, n, run_s, run_n)
        SELECT kind, status, sum(n), sum(run_s), sum(run_n) FROM moved
        WHERE worker IS NULL AND status <> 'unfinished'
        GROUP BY kind, status ORDER BY kind, status
        ON CONFLICT (kind, status) DO UPDATE SET n = c.n + excluded.n,
            run_s = c.run_s + excluded.run_s, run_n = c.run_n + excluded.run_n
    ), charted AS (
        INSERT INTO task_history AS h (at, status, n)
        SELECT at, status, sum(n) FROM moved WHERE worker IS NULL
        GROUP BY at, status HAVING sum(n) <> 0 ORDER BY at, status
        ON CONFLICT (at, status) DO UPDATE SET n = h.n + excluded.n
    ), credited AS (
        INSERT INTO worker_counts AS w (name, completed, failed, last_at)
        SELECT worker, coalesce(sum(n) FILTER (WHERE status = 'completed'), 0),
               coalesce(sum(n) FILTER (WHERE status = 'failed'), 0), to_timestamp(max(at))
        FROM moved WHERE worker IS NOT NULL GROUP BY worker ORDER BY worker
        ON CONFLICT (name) DO UPDATE SET completed = w.completed + excluded.completed,
            failed = w.failed + excluded.failed,
            last_at = greatest(w.last_at, excluded.last_at)
    )
    SELECT count(*) INTO v_n FROM moved;
    RETURN v_n;
END $$;

-- a table whose rows are rewritten at every claim and completion: vacuumed after 1 %
-- of it changed, not the default 20 %, so a year of history does not let dead row
-- versions pile up in the indexes of the unfinished
ALTER TABLE tasks SET (autovacuum_vacuum_scale_factor = 0.01,
                       autovacuum_vacuum_insert_scale_factor = 0.01,
                       autovacuum_analyze_scale_factor = 0.01);
"""

INDEXES_V6 = [
    # retention: finished tasks by age
    "tasks_finished ON tasks (finished_at, seq) WHERE status IN ('completed', 'dead')",
    # the newest DEAD and FAILED tasks, a page at a time
    "tasks_problems ON tasks (status, seq) WHERE status IN ('failed', 'dead')",
    # retention: effects and journal runs that ended
    "effects_task ON effects (task_id)",
    "steps_ended ON steps (created_at) WHERE key = 'end'",
]
"""Indexes of version 6, built ``CONCURRENTLY`` on a populated schema (writers never
wait for them) and plainly in a new one."""

DROPPED_V6 = ["tasks_dead"]
"""Indexes version 6 drops (``CONCURRENTLY``): every DEAD task of the history, read
whole when the newest were asked for; ``tasks_problems`` serves those a page at a time."""

MIGRATIONS: list[str] = [
    # 0 -> 1
    _MIGRATIONS_TABLE + _TABLES_V1 + _NOTIFY_V1 + _CLAIM_V1,
    # 1 -> 2
    _TABLES_V2 + _HELPERS_V2 + _CLAIM_V2,
    # 2 -> 3
    _TABLES_V3 + _CLAIM_V3,
    # 3 -> 4
    _TABLES_V4,
    # 4 -> 5
    _TABLES_V5,
    # 5 -> 6 (and INDEXES_V6, then the aggregates' backfill: see migrate_schema)
    _TABLES_V6,
]
"""``MIGRATIONS[i]`` brings a schema from version ``i`` to ``i + 1``. Never edit one
that has been released: add a new one (and update ``FRESH``)."""

LATEST = len(MIGRATIONS)
"""The schema version this foreperson writes."""

INDEXES: dict[int, list[str]] = {6: INDEXES_V6}
"""Per version, the indexes it adds on tables that may be large, as ``name ON table
(...)``: built with ``CREATE INDEX CONCURRENTLY`` outside the migration's transaction."""

DROPPED: dict[int, list[str]] = {6: DROPPED_V6}
"""Per version, the indexes it drops (``DROP INDEX CONCURRENTLY`` after its transaction)."""

FRESH = "\n".join(MIGRATIONS) + "\n" + "\n".join(
    [f"CREATE INDEX {index};" for version in sorted(INDEXES) for index in INDEXES[version]]
    + [f"DROP INDEX {index};" for version in sorted(DROPPED) for index in DROPPED[version]])
"""The whole current schema for a new database (version ``LATEST``): every migration in
order, in one transaction."""
