"""The SQL of :class:`~foreperson.work.stores.postgres.PostgresStore`, as named queries.

Every statement is parameterised (``%(name)s``); every time comes from ``fp_now(%(now)s)``
(the server's clock unless a test passes a fake time). Rows are locked in one order
everywhere (by id, or ``SKIP LOCKED``): a heartbeat never waits for a row a batched
completion holds, so the two cannot deadlock. Status transitions follow
:mod:`foreperson.work.policy`; its reason codes arrive as parameters where they vary.
"""

from __future__ import annotations

__all__ = ["COLUMNS", "Q", "RUN_COLUMNS"]

COLUMNS = ("id, kind, payload, status, assigned_to, attempts, max_attempts, result, error, "
           "heartbeat_at, depends_on, locks, created_at, started_at, finished_at, not_before, "
           "estimate_s, errors, lease_token, run_id, parent_id, reason, stale_after, "
           "lease_expires_at, awaited, trace_context")

_C_COLUMNS = ", ".join("c." + name.strip() for name in COLUMNS.split(","))
_NOW = "fp_now(%(now)s)"
RUN_COLUMNS = ("run_id, agent, user_id, status, input, result, error, stop_reason, owner, "
                "lease_expires_at, version, created_at, updated_at")
_ISO = f"to_char({_NOW} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')"
_FREE_SLOTS = "UPDATE lock_slots s SET task_id = NULL FROM {src} WHERE s.task_id = {src}.id"
# the held rows of a list of leases, locked in id order (one order everywhere)
_LOCK_LEASES = """SELECT t.id FROM tasks t
    JOIN unnest(%(ids)s::text[], %(tokens)s::text[]) AS l(id, token)
      ON t.id = l.id AND t.lease_token = l.token
    ORDER BY t.id FOR UPDATE OF t"""
_EXPIRED_MESSAGE = ("'worker ' || coalesce(t.assigned_to, '?') || "
                    "' stopped heartbeating: its lease of ' || "
                    "trim_scale(t.lease_s::numeric)::text || ' s expired during attempt ' "
                    "|| t.attempts")

Q: dict[str, str] = {
    "add": f"""
        WITH new AS (
            SELECT * FROM unnest(%(ids)s::text[], %(kinds)s::text[], %(payloads)s::text[],
                %(max_attempts)s::int[], %(deps)s::text[], %(locks)s::text[],
                %(created)s::timestamptz[], %(not_before)s::timestamptz[],
                %(estimates)s::float8[], %(runs)s::text[], %(parents)s::text[],
                %(stale)s::float8[], %(awaited)s::bool[], %(traces)s::text[])
                WITH ORDINALITY
                AS n(id, kind, payload, max_attempts, deps, locks, created_at, not_before,
                     estimate_s, run_id, parent_id, stale_after, awaited, trace_context, ord)
        ), conflicts AS (
            SELECT n.id, t.kind, t.payload FROM new n JOIN tasks t ON t.id = n.id
            WHERE t.kind <> n.kind OR t.payload <> n.payload::jsonb
        ), pruned AS (
            SELECT p.id, p.pruned_at FROM new n JOIN pruned_tasks p ON p.id = n.id
        ), ins AS (
            INSERT INTO tasks (id, kind, payload, max_attempts, depends_on, locks, created_at,
                               not_before, estimate_s, run_id, parent_id, stale_after, awaited,
                               trace_context)
            SELECT n.id, n.kind, n.payload::jsonb, n.max_attempts,
                   ARRAY(SELECT jsonb_array_elements_text(n.deps::jsonb)),
                   ARRAY(SELECT jsonb_array_elements_text(n.locks::jsonb)),
                   coalesce(n.created_at, {_NOW}), n.not_before, n.estimate_s, n.run_id,
                   n.parent_id, n.stale_after, n.awaited, n.trace_context::jsonb
            FROM new n WHERE NOT EXISTS (SELECT 1 FROM conflicts)
                AND NOT EXISTS (SELECT 1 FROM pruned) ORDER BY n.ord
            ON CONFLICT (id) DO NOTHING
            RETURNING id, seq, depends_on, locks
        ), deps AS (
            INSERT INTO task_deps (task_id, dep_id)
            SELECT DISTINCT ins.id, d FROM ins, unnest(ins.depends_on) AS d
            ON CONFLICT DO NOTHING
        ), slots AS (
            INSERT INTO lock_slots (name, slot)
            SELECT DISTINCT l, 0 FROM ins, unnest(ins.locks) AS l
            ON CONFLICT DO NOTHING
        )
        SELECT 'inserted', id, seq::text, NULL FROM ins
        UNION ALL
        SELECT 'conflict', id, kind, payload::text FROM conflicts
        UNION ALL
        SELECT 'pruned', id, extract(epoch FROM pruned_at)::text, NULL FROM pruned""",
    "get": f"SELECT {COLUMNS} FROM tasks WHERE id = %(id)s",
    "get_many": f"SELECT {COLUMNS} FROM tasks WHERE id = ANY(%(ids)s) ORDER BY seq",
    "ready": """
        SELECT id FROM claim_tasks('', %(kinds)s, NULL, %(limit)s, 0, %(now)s, 1.0)""",
    "claim": f"""
        SELECT {COLUMNS} FROM claim_tasks(%(worker)s, %(kinds)s, %(ids)s, %(limit)s,
                                          %(start)s, %(now)s, %(lease)s) ORDER BY seq""",
    "start": f"""
        WITH held AS ({_LOCK_LEASES})
        UPDATE tasks t SET status = 'running', started_at = {_NOW}, heartbeat_at = {_NOW},
            attempts = t.attempts + CASE WHEN t.status = 'assigned' THEN 1 ELSE 0 END,
            lease_expires_at = {_NOW} + make_interval(secs => t.lease_s)
        FROM held WHERE t.id = held.id
        RETURNING t.id""",
    # Rows another transaction holds (a completion in flight) are skipped, not waited for,
    # and not reported lost: only a lease that no longer matches is lost.
    "heartbeat": f"""
        WITH l AS (
            SELECT * FROM unnest(%(ids)s::text[], %(tokens)s::text[]) AS l(id, token)
        ), held AS (
            SELECT t.id FROM tasks t JOIN l ON t.id = l.id AND t.lease_token = l.token
            ORDER BY t.id FOR UPDATE OF t SKIP LOCKED
        ), renewed AS (
            UPDATE tasks t SET heartbeat_at = {_NOW},
                lease_expires_at = {_NOW} + make_interval(secs => t.lease_s)
            FROM held WHERE t.id = held.id
        )
        SELECT l.id FROM l WHERE NOT EXISTS (
            SELECT 1 FROM tasks t WHERE t.id = l.id AND t.lease_token = l.token)""",
    "complete": f"""
        WITH held AS ({_LOCK_LEASES}), done AS (
            UPDATE tasks t SET status = 'completed', result = r.result::jsonb, error = NULL,
                reason = NULL, finished_at = {_NOW}, lease_token = NULL,
                lease_expires_at = NULL,
                attempts = t.attempts + CASE WHEN t.status = 'assigned' THEN 1 ELSE 0 END
            FROM held, unnest(%(ids)s::text[], %(results)s::text[]) AS r(id, result)
            WHERE t.id = held.id AND r.id = held.id
            RETURNING t.id
        ), freed AS ({_FREE_SLOTS.format(src="done")})
        SELECT id FROM done""",
    # A worker process's whole turn in one statement (autocommit: one round trip, one
    # commit): record the starts of prefetched tasks, store the finished ones' results,
    # and claim new work. The rows written are locked first, in id order; the claim
    # sees the statement's snapshot (what this statement completes is claimable next
    # turn) and takes only PENDING/FAILED rows, so the two never touch one row.
    "turn": f"""
        WITH l AS (
            SELECT * FROM unnest(%(ids)s::text[], %(tokens)s::text[], %(results)s::text[])
                AS l(id, token, result)
        ), held AS (
            SELECT t.id, l.result FROM tasks t JOIN l ON t.id = l.id AND t.lease_token = l.token
            ORDER BY t.id FOR UPDATE OF t
        ), started AS (
            UPDATE tasks t SET status = 'running', started_at = {_NOW}, heartbeat_at = {_NOW},
                attempts = t.attempts + CASE WHEN t.status = 'assigned' THEN 1 ELSE 0 END,
                lease_expires_at = {_NOW} + make_interval(secs => t.lease_s)
            FROM held WHERE t.id = held.id AND held.result IS NULL
        ), done AS (
            UPDATE tasks t SET status = 'completed', result = held.result::jsonb,
                error = NULL, reason = NULL, finished_at = {_NOW}, lease_token = NULL,
                lease_expires_at = NULL,
                attempts = t.attempts + CASE WHEN t.status = 'assigned' THEN 1 ELSE 0 END
            FROM held WHERE t.id = held.id AND held.result IS NOT NULL
            RETURNING t.id
        ), freed AS ({_FREE_SLOTS.format(src="done")})
        SELECT d.ids, {_C_COLUMNS}
        FROM (SELECT coalesce(array_agg(id), '{{}}') AS ids FROM done) d
        LEFT JOIN LATERAL claim_tasks(%(worker)s, %(kinds)s, NULL, %(limit)s, %(start)s,
                                      %(now)s, %(lease)s) c ON true""",
    "fail": f"""
        WITH f AS (
            UPDATE tasks t SET
                attempts = t.attempts + CASE WHEN t.status = 'assigned' THEN 1 ELSE 0 END,
                status = %(status)s,
                reason = CASE WHEN %(status)s = 'failed' THEN 'retrying'
                              WHEN t.attempts + CASE WHEN t.status = 'assigned' THEN 1 ELSE 0
                                   END >= t.max_attempts THEN 'retries_exhausted'
                              ELSE 'not_retryable' END,
                error = %(error)s,
                errors = t.errors || jsonb_build_array(jsonb_build_object(
                    'attempt', t.attempts + CASE WHEN t.status = 'assigned' THEN 1 ELSE 0 END,
                    'error', %(error)s::text, 'at', {_ISO}, 'worker', t.assigned_to)),
                not_before = {_NOW} + make_interval(secs => %(delay)s::float8),
                finished_at = CASE WHEN %(status)s = 'dead' THEN {_NOW} END,
                lease_token = NULL, assigned_to = NULL, lease_expires_at = NULL
            WHERE t.id = %(id)s AND t.lease_token = %(token)s
            RETURNING t.id
        ), freed AS ({_FREE_SLOTS.format(src="f")})
        SELECT count(*) FROM f""",
    "release": f"""
        WITH r AS (
            UPDATE tasks t SET status = 'pending', reason = %(reason)s,
                attempts = greatest(0, t.attempts
                                    - CASE WHEN t.status = 'running' THEN 1 ELSE 0 END),
                lease_token = NULL, assigned_to = NULL, lease_expires_at = NULL
            WHERE t.id = %(id)s AND t.lease_token = %(token)s
            RETURNING t.id
        ), freed AS ({_FREE_SLOTS.format(src="r")})
        SELECT count(*) FROM r""",
    "back_off": f"""
        WITH b AS (
            UPDATE tasks t SET status = 'pending', reason = %(reason)s, error = %(message)s,
                attempts = greatest(0, t.attempts
                                    - CASE WHEN t.status = 'running' THEN 1 ELSE 0 END),
                lease_token = NULL, assigned_to = NULL, lease_expires_at = NULL,
                not_before = {_NOW} + make_interval(secs => %(after)s::float8)
            WHERE t.id = %(id)s AND t.lease_token = %(token)s
            RETURNING t.id, t.kind, t.locks
        ), freed AS ({_FREE_SLOTS.format(src="b")}
        ), pushed AS (
            UPDATE limits l SET tat = greatest(l.tat, {_NOW} + make_interval(
                secs => %(after)s::float8 + (l.burst - 1) / l.rate_per_s))
            FROM b
            WHERE l.rate_per_s IS NOT NULL
              AND CASE WHEN %(resource)s::text IS NULL
                       THEN l.name = ANY (b.locks || ('kind:' || b.kind))
                       ELSE l.name = %(resource)s END
        )
        SELECT count(*) FROM b""",
    "reclaim": f"""
        WITH stale AS (
            SELECT id FROM tasks
            WHERE status IN ('assigned', 'running')
              AND (lease_expires_at < {_NOW}
                   OR (%(prefix)s::text IS NOT NULL
                       AND left(assigned_to, length(%(prefix)s)) = %(prefix)s))
            ORDER BY id
            FOR UPDATE SKIP LOCKED
        ), upd AS (
            UPDATE tasks t SET
                status = CASE WHEN t.status = 'running' AND t.attempts >= t.max_attempts
                              THEN 'dead' ELSE 'pending' END,
                reason = CASE WHEN t.status = 'running' AND t.attempts >= t.max_attempts
                              THEN 'retries_exhausted' ELSE 'lease_expired' END,
                error = CASE WHEN t.status = 'running' THEN {_EXPIRED_MESSAGE} ELSE t.error END,
                errors = CASE WHEN t.status = 'running' THEN
                    t.errors || jsonb_build_array(jsonb_build_object(
                        'attempt', t.attempts, 'error', {_EXPIRED_MESSAGE}, 'at', {_ISO},
                        'worker', t.assigned_to))
                    ELSE t.errors END,
                lease_token = NULL, assigned_to = NULL, lease_expires_at = NULL,
                finished_at = CASE WHEN t.status = 'running' AND t.attempts >= t.max_attempts
                                   THEN {_NOW} END
            FROM stale WHERE t.id = stale.id
            RETURNING t.id, t.seq
        ), freed AS ({_FREE_SLOTS.format(src="upd")}
        ), forgotten AS (
            DELETE FROM workers WHERE heartbeat_at < {_NOW} - interval '1 day'
        )
        SELECT id FROM upd ORDER BY seq""",
    # every waiting task with a DEAD dependency, found from the waiting (the partial
    # index of PENDING and FAILED tasks: the work at hand, never the history)
    "park": f"""
        UPDATE tasks t SET status = 'dead', finished_at = {_NOW}, reason = 'dependency_dead',
            error = 'dependency ' || b.dep_id || ' is dead'
        FROM (SELECT DISTINCT ON (d.task_id) d.task_id, d.dep_id
              FROM tasks w JOIN task_deps d ON d.task_id = w.id
              JOIN tasks p ON p.id = d.dep_id
              WHERE w.status IN ('pending', 'failed') AND w.depends_on <> '{{}}'
                AND p.status = 'dead'
              ORDER BY d.task_id, d.dep_id) AS b
        WHERE t.id = b.task_id AND t.status IN ('pending', 'failed')
        RETURNING t.id""",
    # the waiting direct dependents of DEAD tasks among %(ids)s
    "park_after": f"""
        UPDATE tasks t SET status = 'dead', finished_at = {_NOW}, reason = 'dependency_dead',
            error = 'dependency ' || b.dep_id || ' is dead'
        FROM (SELECT DISTINCT ON (d.task_id) d.task_id, d.dep_id
              FROM tasks p JOIN task_deps d ON d.dep_id = p.id
              WHERE p.id = ANY (%(ids)s) AND p.status = 'dead'
              ORDER BY d.task_id, d.dep_id) AS b
        WHERE t.id = b.task_id AND t.status IN ('pending', 'failed')
        RETURNING t.id""",
    "revive": """
        WITH RECURSIVE chosen(id) AS (
            SELECT id FROM tasks WHERE id = ANY (%(ids)s) AND status = 'dead'
            UNION
            SELECT t.id FROM chosen c
            JOIN task_deps d ON d.dep_id = c.id
            JOIN tasks t ON t.id = d.task_id
            WHERE t.status = 'dead' AND t.reason = 'dependency_dead'
        ), upd AS (
            UPDATE tasks t SET status = 'pending', reason = 'revived', attempts = 0,
                not_before = NULL, finished_at = NULL
            FROM chosen c WHERE t.id = c.id
            RETURNING t.id, t.seq
        )
        SELECT id FROM upd ORDER BY seq""",
    # The task row is share-locked while the effect is recorded, so a concurrent reclaim
    # either happens first (nothing is recorded) or waits for the commit.
    "effect_claim": f"""
        WITH held AS (
            SELECT t.id FROM tasks t
            WHERE t.id = %(id)s AND t.lease_token = %(token)s
              AND t.status IN ('assigned', 'running')
            FOR SHARE
        )
        INSERT INTO effects (key, task_id, lease_token, created_at, state)
        SELECT %(key)s, held.id, %(token)s, {_NOW}, 'claimed' FROM held
        ON CONFLICT (key) DO UPDATE SET lease_token = EXCLUDED.lease_token,
            created_at = EXCLUDED.created_at
        WHERE effects.state = 'claimed' AND effects.lease_token <> EXCLUDED.lease_token
        RETURNING key""",
    "effect_done": f"""
        WITH held AS (
            SELECT t.id FROM tasks t
            WHERE t.id = %(id)s AND t.lease_token = %(token)s
              AND t.status IN ('assigned', 'running')
            FOR SHARE
        )
        INSERT INTO effects (key, task_id, lease_token, created_at, state)
        SELECT %(key)s, held.id, %(token)s, {_NOW}, 'done' FROM held
        ON CONFLICT (key) DO UPDATE SET state = 'done', lease_token = EXCLUDED.lease_token
        RETURNING key""",
    "finished_among": f"""
        SELECT {COLUMNS} FROM tasks WHERE id = ANY(%(ids)s)
          AND status IN ('completed', 'dead')""",
    "mean_durations": """
        SELECT kind, sum(run_s) / sum(run_n) FROM (
            SELECT kind, run_s, run_n FROM task_counts WHERE status = 'completed'
            UNION ALL
            SELECT kind, run_s, run_n FROM task_deltas
            WHERE status = 'completed' AND worker IS NULL) c
        GROUP BY kind HAVING sum(run_n) > 0""",
    # the whole store's counts: the finished from the folded aggregates plus the deltas
    # not folded yet, the unfinished on the partial indexes of the waiting and the held
    "counts": """
        SELECT kind, status, sum(n) FROM (
            SELECT kind, status, n FROM task_counts
            UNION ALL
            SELECT kind, status, n FROM task_deltas
            WHERE worker IS NULL AND status <> 'unfinished'
            UNION ALL
            SELECT kind, status, count(*) FROM tasks WHERE status IN ('pending', 'failed')
            GROUP BY kind, status
            UNION ALL
            SELECT kind, status, count(*) FROM tasks WHERE status IN ('assigned', 'running')
            GROUP BY kind, status) c
        GROUP BY kind, status HAVING sum(n) <> 0""",
    "run_counts": """
        SELECT kind, status, count(*) FROM tasks WHERE run_id = %(run)s
        GROUP BY kind, status""",
    # seed 000's other two numbers, from the unfinished tasks only (the oldest: the first
    # added of the waiting, one index step, or of the held); with the number of deltas
    # waiting to be folded (a reader folds them when many pile up)
    "stats": f"""
        SELECT
          (SELECT coalesce(jsonb_object_agg(assigned_to, n), '{{}}')
           FROM (SELECT assigned_to, count(*) AS n FROM tasks
                 WHERE status IN ('assigned', 'running') AND assigned_to IS NOT NULL
                 GROUP BY assigned_to) a),
          least((SELECT created_at FROM tasks WHERE status IN ('pending', 'failed')
                 ORDER BY seq LIMIT 1),
                (SELECT min(created_at) FROM tasks WHERE status IN ('assigned', 'running'))),
          {_NOW},
          (SELECT coalesce(jsonb_object_agg(name, extract(epoch FROM heartbeat_at)),
                           '{{}}') FROM workers),
          (SELECT count(*) FROM (SELECT 1 FROM task_deltas LIMIT 5001) d)""",
    "run_stats": f"""
        SELECT
          (SELECT coalesce(jsonb_object_agg(assigned_to, n), '{{}}')
           FROM (SELECT assigned_to, count(*) AS n FROM tasks
                 WHERE run_id = %(run)s AND status IN ('assigned', 'running')
                   AND assigned_to IS NOT NULL
                 GROUP BY assigned_to) a),
          (SELECT min(created_at) FROM tasks
           WHERE run_id = %(run)s AND status IN ('pending', 'assigned', 'running', 'failed')),
          {_NOW},
          (SELECT coalesce(jsonb_object_agg(name, extract(epoch FROM heartbeat_at)),
                           '{{}}') FROM workers),
          0""",
    "fold": "SELECT fold_task_deltas()",
    "history_last": """
        SELECT greatest((SELECT max(at) FROM task_history),
                        (SELECT max(at) FROM task_deltas WHERE worker IS NULL))""",
    "history": """
        SELECT at, status, sum(n) FROM (
            SELECT at, status, n FROM task_history WHERE at >= %(low)s
            UNION ALL
            SELECT at, status, n FROM task_deltas WHERE worker IS NULL AND at >= %(low)s) c
        GROUP BY at, status HAVING sum(n) <> 0""",
    "run_history": """
        SELECT status, extract(epoch FROM created_at), extract(epoch FROM finished_at)
        FROM tasks WHERE run_id = %(run)s""",
    # named workers, or those seen since a time (the worker_counts_last index), or all
    "worker_totals": """
        SELECT name, sum(completed), sum(failed), max(last_at) FROM (
            SELECT name, completed, failed, last_at FROM worker_counts
            WHERE (%(names)s::text[] IS NULL OR name = ANY (%(names)s))
              AND (%(since)s::timestamptz IS NULL OR last_at >= %(since)s)
            UNION ALL
            SELECT worker, CASE WHEN status = 'completed' THEN n ELSE 0 END,
                   CASE WHEN status = 'failed' THEN n ELSE 0 END, to_timestamp(at)
            FROM task_deltas
            WHERE worker IS NOT NULL AND (%(names)s::text[] IS NULL OR worker = ANY (%(names)s))
        ) w GROUP BY name
        HAVING %(since)s::timestamptz IS NULL OR max(last_at) >= %(since)s""",
    "worker_seen": f"""
        INSERT INTO workers (name, kinds, concurrency, started_at, heartbeat_at, host, pid)
        VALUES (%(name)s, %(kinds)s, %(concurrency)s, {_NOW}, {_NOW}, %(host)s, %(pid)s)
        ON CONFLICT (name) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at,
            kinds = EXCLUDED.kinds, concurrency = EXCLUDED.concurrency,
            host = EXCLUDED.host, pid = EXCLUDED.pid""",
    "workers": """
        SELECT name, kinds, concurrency, host, pid, started_at, heartbeat_at FROM workers
        ORDER BY name""",
    "dependents": """
        SELECT t.id FROM task_deps d JOIN tasks t ON t.id = d.task_id
        WHERE d.dep_id = %(id)s ORDER BY t.seq""",
    "worker_gone": "DELETE FROM workers WHERE name = %(name)s",
    "step_get": """
        SELECT run_id, key, kind, digest, result, version, created_at, seq, request FROM steps
        WHERE run_id = %(run_id)s AND key = %(key)s""",
    "step_put": f"""
        WITH ins AS (
            INSERT INTO steps (run_id, key, kind, version, digest, result, created_at, request)
            VALUES (%(run_id)s, %(key)s, %(kind)s, %(version)s, %(digest)s,
                    %(result)s::jsonb, {_NOW}, %(request)s::jsonb)
            ON CONFLICT (run_id, key) DO NOTHING
            RETURNING run_id, key, kind, digest, result, version, created_at, seq, request
        )
        SELECT true, * FROM ins
        UNION ALL
        SELECT false, run_id, key, kind, digest, result, version, created_at, seq, request
        FROM steps
        WHERE run_id = %(run_id)s AND key = %(key)s AND NOT EXISTS (SELECT 1 FROM ins)""",
    "step_any": "SELECT 1 FROM steps WHERE run_id = %(run_id)s LIMIT 1",
    "step_list": """
        SELECT run_id, key, kind, digest, result, version, created_at, seq, request FROM steps
        WHERE run_id = %(run_id)s ORDER BY seq""",
    "run_create": f"""
        WITH ins AS (
            INSERT INTO runs (run_id, agent, user_id, status, input, owner, lease_expires_at,
                              version, created_at, updated_at)
            VALUES (%(run_id)s, %(agent)s, %(user_id)s, %(status)s, %(input)s::jsonb,
                    %(owner)s, %(lease_expires_at)s, %(version)s, {_NOW}, {_NOW})
            ON CONFLICT (run_id) DO NOTHING
            RETURNING {RUN_COLUMNS}
        )
        SELECT * FROM ins
        UNION ALL
        SELECT {RUN_COLUMNS} FROM runs
        WHERE run_id = %(run_id)s AND NOT EXISTS (SELECT 1 FROM ins)""",
    "run_get": f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = %(run_id)s",
    "run_claim": f"""
        UPDATE runs SET owner = %(owner)s, status = 'running', updated_at = {_NOW},
            lease_expires_at = {_NOW} + make_interval(secs => %(lease)s)
        WHERE run_id = %(run_id)s
          AND (owner IS NULL OR owner = %(owner)s OR owner = %(take_from)s
               OR lease_expires_at IS NULL OR lease_expires_at < {_NOW})
        RETURNING {RUN_COLUMNS}""",
    "run_renew": f"""
        UPDATE runs SET lease_expires_at = {_NOW} + make_interval(secs => %(lease)s)
        WHERE run_id = %(run_id)s AND owner = %(owner)s RETURNING true""",
    "run_end": f"""
        UPDATE runs SET status = %(status)s, result = %(result)s::jsonb, error = %(error)s,
            stop_reason = %(stop_reason)s, owner = NULL, lease_expires_at = NULL,
            updated_at = {_NOW}
        WHERE run_id = %(run_id)s AND owner = %(owner)s RETURNING true""",
}
