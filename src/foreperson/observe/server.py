"""``foreperson serve``: a local web page over a task store, with no service to install.

Starlette on uvicorn (:mod:`foreperson.observe._http`: bounded connections, head and body
timeouts, size limits, a deep backlog), one page (HTML, script and style shipped in this
package: no CDN, works offline) that polls a JSON API once a second:

* ``GET /``, ``/task/<id>``, ``/runs``, ``/runs/<id>``: the page (it routes by path);
* ``GET /api/snapshot[?run=ID]``: seed 000's three numbers now (tasks by status and
  kind, active per worker, oldest unfinished age), the live workers, the newest DEAD
  and FAILED tasks with every attempt's error;
* ``GET /api/tasks?status=dead|failed&offset=N``: the next page of DEAD or FAILED tasks;
* ``GET /api/history[?run=ID]``: unfinished, COMPLETED and DEAD tasks over the last
  hour of activity (or one run), from the changes the store keeps per second;
* ``GET /api/task/<id>``: one task with its dependencies, dependents and timeline;
* ``GET /api/runs``: ``{"runs": [...], "shown": "all"|"user"|"none", "user", "note"}``,
  the durable agent runs the caller may see; ``GET /api/runs/<id>``: a run as a tree;
* ``GET /metrics``: Prometheus metrics (with ``prometheus-client``);
* ``POST /api/retry`` (only with ``allow_retry``): revive DEAD tasks, the rule of
  ``foreperson retry``.

Every answer costs what it shows, not what the store holds: a year of history is read
through aggregates and indexes, never row by row; store reads run in threads (at most
:data:`STORE_THREADS`) and each answer is reused for :data:`CACHE_S`, so many open pages
cost what one does. Read-only by default. Safety: every value reaches the page as JSON
and is put in the document as text (never as markup), under a Content-Security-Policy
that allows only this server's own script; the server answers only requests whose
``Host`` is an accepted name whatever the bind address (no DNS rebinding), refuses
other sites' scripts, asks for the token when one is set (reads included), shows a
durable run, its tasks and their rows only to the run's user (seed 001: tenant pinning:
one rule, :func:`run_filter`, for every route), and a retry must be a
same-origin JSON POST carrying the page's per-process token (no cross-site request can
forge one). Ids in URLs and bodies are checked before any store sees them (400).
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any

import anyio
import anyio.to_thread

from ..errors import StoreError
from ..journal import RunLedger
from ..work.store import ReportsWork, StoreStats, TaskStore
from ..work.task import Status, Task
from ._http import (
    BODY_TIMEOUT_S,
    HEAD_TIMEOUT_S,
    MAX_BODY_BYTES,
    MAX_CONNECTIONS,
    Access,
    AsgiServer,
    Guard,
    Identity,
    default_allowed_hosts,
    is_loopback,
)
from .workers import live_workers

__all__ = ["CACHE_S", "EVERY_RUN", "MAX_ID_CHARS", "MAX_RETRY_IDS", "PROBLEMS_SHOWN",
           "STORE_THREADS", "RunScope", "StatusServer", "history", "problems", "run_filter",
           "snapshot", "task_detail"]

log = logging.getLogger("foreperson.observe")

PROBLEMS_SHOWN = 50
"""DEAD and FAILED tasks listed on the page (each; the counts say how many there are)."""


@dataclass(frozen=True)
class RunScope:
    """Whose durable runs a caller sees (seed 001, tenant pinning): every user's
    (``every``), one user's (``user``), or none."""

    every: bool = False
    user: str | None = None

    def sees(self, owner: str | None) -> bool:
        """Whether a run of ``owner`` (None: anonymous) is shown."""
        return self.every or (self.user is not None and owner == self.user)

    @property
    def hidden(self) -> bool:
        """Whether no run at all is shown."""
        return not self.every and self.user is None


EVERY_RUN = RunScope(every=True)
"""The scope of library callers and of ``--show-runs-of-all-users``: every run shown."""


def run_filter(store: TaskStore, scope: RunScope) -> Callable[[str | None], bool]:
    """The one rule of the page for a run and for every task of a run (seed 001, tenant
    pinning): ``shown(run_id)`` says whether ``scope`` sees that run, its tree, its tasks
    and their rows. A run with a record (a durable agent run, a state machine's) is seen
    when ``scope`` sees its user (an anonymous run: only when every run is shown); a
    journaled run without a record has no user: seen only when every run is shown; a run
    id that is neither (a batch job's label) guards nothing: seen. ``None`` (work outside
    any run) is seen.

    Args:
        store: the store (its run records and journal are read, each run once: use one
            filter per answer).
        scope: whose runs the caller sees.

    Returns:
        ``shown(run_id) -> bool``.

    Raises:
        StoreError: the store failed (raised by ``shown``).
    """
    if scope.every:
        return lambda run_id: True
    known: dict[str, bool] = {}

    def shown(run_id: str | None) -> bool:
        if run_id is None:
            return True
        if run_id not in known:
            record = store.get_run(run_id) if isinstance(store, RunLedger) else None
            if record is not None:
                known[run_id] = scope.sees(record.user_id)
            else:
                known[run_id] = not _journaled(store, run_id)
        return known[run_id]

    return shown


def _journaled(store: TaskStore, run_id: str) -> bool:
    """Whether ``run_id`` has journaled steps: one index probe (``has_steps``) on the
    stores that have it, never a read of every step of a long run."""
    probe = getattr(store, "has_steps", None)
    if probe is not None:
        return bool(probe(run_id))
    return bool(getattr(store, "list_steps", lambda _run: [])(run_id))


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _task_row(task: Task) -> dict[str, Any]:
    """A task as the lists of the page show it (no payload or result)."""
    return {"id": task.id, "kind": task.kind, "status": task.status.value,
            "attempts": task.attempts, "max_attempts": task.max_attempts,
            "reason": task.reason, "error": task.error, "errors": task.errors,
            "assigned_to": task.assigned_to, "run_id": task.run_id,
            "created_at": _iso(task.created_at), "finished_at": _iso(task.finished_at),
            "not_before": _iso(task.not_before)}


def problems(store: TaskStore, status: Status, *, run_id: str | None = None,
             limit: int = PROBLEMS_SHOWN, offset: int = 0, scope: RunScope = EVERY_RUN,
             shown: Callable[[str | None], bool] | None = None) -> list[dict[str, Any]]:
    """A page of the DEAD (or FAILED) tasks, the newest first, with every attempt's error
    (an index read of the page, however many there are).

    Args:
        store: the store.
        status: ``Status.DEAD`` or ``Status.FAILED``.
        run_id: one run's (None: the whole store's).
        limit: tasks in the page.
        offset: tasks skipped, newest first (the next page: ``offset + limit``).
        scope: whose runs the caller sees: the tasks of other runs are left out of the
            page (a page may then hold fewer than ``limit``), a run it does not see has
            none (see :func:`run_filter`).
        shown: the filter of ``scope`` already made (None: made here).

    Returns:
        The tasks as rows: ``id``, ``kind``, ``status``, ``attempts``, ``errors`` ...

    Raises:
        StoreError: the store failed.
    """
    shown = shown or run_filter(store, scope)
    if run_id is not None and not shown(run_id):
        return []
    return [_task_row(t) for t in store.list_tasks(status=status, run_id=run_id,
                                                   limit=limit, offset=offset,
                                                   newest_first=True)
            if run_id is not None or shown(t.run_id)]


def snapshot(store: TaskStore, *, run_id: str | None = None,
             limit: int = PROBLEMS_SHOWN, scope: RunScope = EVERY_RUN) -> dict[str, Any]:
    """What the page shows now, as JSON; its cost does not grow with the history.

    Args:
        store: the store.
        run_id: one run's tasks (None: the whole store). Workers are the store's.
        limit: most DEAD and most FAILED tasks listed (the newest; the counts say how
            many there are, ``/api/tasks`` pages through the rest).
        scope: whose runs the caller sees (:func:`run_filter`): a run it does not see is
            answered as a run without tasks (its existence does not show); in the whole
            store's lists the tasks of such runs are left out (the counts are numbers of
            the whole store, never a task).

    Returns:
        ``now``, ``total``, ``counts`` (status -> n), ``by_kind`` (kind -> status -> n),
        ``active_by_worker``, ``oldest_unfinished_age_s`` (seconds or None),
        ``workers`` (the live ones: name, process, last_heartbeat, active, completed,
        failed, health), ``dead`` and ``failed`` (tasks with every attempt's error).

    Raises:
        StoreError: the store failed.
    """
    shown = run_filter(store, scope)
    stats = store.stats(run_id=run_id)
    by_kind = store.counts_by_kind(run_id=run_id) if isinstance(store, ReportsWork) else {}
    if run_id is not None and not shown(run_id):      # as a run without tasks
        stats = StoreStats({s: 0 for s in stats.counts}, {}, None, stats.now, stats.workers)
        by_kind = {}
    return {
        "now": _iso(stats.now), "run_id": run_id, "total": stats.total,
        "counts": {s.value: n for s, n in stats.counts.items()},
        "by_kind": {k: {s.value: n for s, n in v.items()} for k, v in sorted(by_kind.items())},
        "active_by_worker": stats.active_by_worker,
        "oldest_unfinished_age_s": stats.oldest_unfinished_age_s,
        "workers": live_workers(store, stats),
        "dead": problems(store, Status.DEAD, run_id=run_id, limit=limit, shown=shown),
        "failed": problems(store, Status.FAILED, run_id=run_id, limit=limit, shown=shown),
    }


def history(store: TaskStore, *, run_id: str | None = None, points: int = 60,
            scope: RunScope = EVERY_RUN) -> list[dict[str, Any]]:
    """Unfinished, COMPLETED and DEAD tasks over the last hour of activity (or over one
    run), from the store's kept changes (:meth:`~foreperson.work.store.ReportsWork.history`).

    Args:
        store: the store.
        run_id: one run's tasks (None: the whole store's numbers).
        points: instants of the window.
        scope: whose runs the caller sees: a run it does not see has no history, as a
            run without tasks (:func:`run_filter`).

    Returns:
        ``[{"at", "unfinished", "completed", "dead"}, ...]``, oldest first.

    Raises:
        StoreError: the store failed.
    """
    if not isinstance(store, ReportsWork):
        return []
    if run_id is not None and not run_filter(store, scope)(run_id):
        return []
    return [{"at": _iso(p.at), "unfinished": p.unfinished, "completed": p.completed,
             "dead": p.dead} for p in store.history(run_id=run_id, points=points)]


def _brief(store: TaskStore, ids: list[str], shown: Callable[[str | None], bool], *,
           unknown: bool) -> list[dict[str, Any]]:
    """Tasks as (id, kind, status); one of a run not ``shown`` is as a missing one: listed
    with status ``unknown`` when ``unknown`` (a dependency named by the task), else left
    out (a dependent)."""
    out = []
    for task_id in ids:
        task = store.get(task_id)
        if task is not None and not shown(task.run_id):
            task = None
        if task is not None or unknown:
            out.append({"id": task_id, "kind": task.kind if task else None,
                        "status": task.status.value if task else "unknown"})
    return out


def _events(task: Task) -> list[dict[str, Any]]:
    """A task's timeline: created, each failed attempt, started, finished, backoff."""
    events: list[dict[str, Any]] = []
    if task.created_at is not None:
        events.append({"at": _iso(task.created_at), "what": "created"})
    for entry in task.errors:
        who = f" on {entry['worker']}" if entry.get("worker") else ""
        events.append({"at": entry.get("at"),
                       "what": f"attempt {entry.get('attempt')} failed{who}",
                       "detail": entry.get("error")})
    if task.started_at is not None:
        events.append({"at": _iso(task.started_at),
                       "what": f"attempt {task.attempts} started"
                       + (f" on {task.assigned_to}" if task.assigned_to else "")})
    if task.heartbeat_at is not None and task.status.active:
        events.append({"at": _iso(task.heartbeat_at), "what": "last heartbeat"})
    if task.finished_at is not None:
        events.append({"at": _iso(task.finished_at), "what": task.status.value,
                       "detail": task.reason})
    if task.not_before is not None and task.status is Status.FAILED:
        events.append({"at": _iso(task.not_before), "what": "retry due"})
    return sorted(events, key=lambda e: e["at"] or "")


def task_detail(store: TaskStore, task_id: str, *, scope: RunScope = EVERY_RUN
                ) -> dict[str, Any] | None:
    """One task for its page: the record with payload and result, its dependencies
    and dependents (id, kind, status) and its timeline; None when unknown.

    Args:
        store: the store.
        task_id: the task.
        scope: whose runs the caller sees: a task of a run it does not see is None, as
            an unknown one (:func:`run_filter`), and so are such dependencies and
            dependents.

    Returns:
        The task's fields, ``payload``, ``result``, ``depends_on``, ``dependents``,
        ``timeline``; or None.

    Raises:
        StoreError: the store failed.
    """
    shown = run_filter(store, scope)
    task = store.get(task_id)
    if task is None or not shown(task.run_id):
        return None
    dependents = store.dependents(task_id) if isinstance(store, ReportsWork) else [
        t.id for t in store.list_tasks() if task_id in t.depends_on]
    return {**_task_row(task), "payload": task.payload, "result": task.result,
            "locks": task.locks, "parent_id": task.parent_id,
            "started_at": _iso(task.started_at), "heartbeat_at": _iso(task.heartbeat_at),
            "lease_expires_at": _iso(task.lease_expires_at),
            "depends_on": _brief(store, task.depends_on, shown, unknown=True),
            "dependents": _brief(store, dependents, shown, unknown=False),
            "timeline": _events(task)}


def _runs(store: TaskStore, scope: RunScope = EVERY_RUN) -> list[dict[str, Any]]:
    """The durable runs ``scope`` sees, newest first (at most 100)."""
    if not isinstance(store, RunLedger) or scope.hidden:
        return []
    records = (store.list_runs(limit=100) if scope.every
               else store.list_runs(user_id=scope.user, limit=100))
    return [{"run_id": r.run_id, "agent": r.agent, "user_id": r.user_id, "status": r.status,
             "stop_reason": r.stop_reason, "created_at": _iso(r.created_at),
             "updated_at": _iso(r.updated_at)} for r in records if scope.sees(r.user_id)]


def _run_tree(store: TaskStore, run_id: str, scope: RunScope = EVERY_RUN
              ) -> dict[str, Any] | None:
    """A run as a tree: a durable agent run from its record and journal, or any other
    journaled run (a state machine's) as its steps; None when there is no such run or
    ``scope`` does not see it (:func:`run_filter`; the same answer: another user's run
    looks missing)."""
    from ..runtime import outline_run

    if not run_filter(store, scope)(run_id):
        return None
    record = store.get_run(run_id) if isinstance(store, RunLedger) else None
    steps = store.list_steps(run_id) if hasattr(store, "list_steps") else []
    if record is not None:
        head, outline = outline_run(record, steps)
        return {"run_id": run_id, "status": record.status, "header": head,
                "lines": [{"depth": d, "text": t} for d, t in outline]}
    if not steps:
        return None
    start = steps[0].created_at
    lines: list[dict[str, Any]] = []
    for step in steps:
        offset = (f"  +{(step.created_at - start).total_seconds():.3f}s"
                  if start and step.created_at else "")
        lines.append({"depth": step.key.count("/"),
                      "text": f"{step.kind} {step.key}: {_short(step.result)}{offset}"})
    return {"run_id": run_id, "status": None, "header": [f"run {run_id}: {len(steps)} steps"],
            "lines": lines}


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


MAX_ID_CHARS = 1024
"""Longest task or run id the page accepts in a URL or a retry (longer: 400)."""
MAX_RETRY_IDS = 10_000
"""Most task ids in one retry request."""
STORE_THREADS = 4
"""Store reads running at once (each in a thread: the event loop never waits on one)."""
CACHE_S = 0.5
"""Seconds an answer read from the store is reused (200 pages polling once a second cost
about two store reads a second per view, not 200)."""


class _Bad(Exception):
    """A request answered with an error (status, message) instead of a traceback."""

    def __init__(self, status: int, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close


def _checked_id(value: str | None, what: str) -> str:
    """``value`` when it is a usable task or run id.

    Raises:
        _Bad: 400 for an empty id, one over :data:`MAX_ID_CHARS`, or one holding a NUL or
            another control character or a lone surrogate (no store can look it up).
    """
    if not value or len(value) > MAX_ID_CHARS:
        raise _Bad(400, f"{what} must be 1 to {MAX_ID_CHARS} characters")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _Bad(400, f"{what} holds a control character (NUL, newline, ...)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad(400, f"{what} is not valid text") from None
    return value


class _Reads:
    """Store reads off the event loop: at most ``threads`` at once (each in a thread),
    each answer kept ``ttl_s`` seconds, one read per key in flight (later askers wait for
    it rather than reading again)."""

    def __init__(self, ttl_s: float, threads: int, max_kept: int = 1024) -> None:
        self.ttl_s = ttl_s
        self.threads = threads
        self.max_kept = max_kept
        self._kept: dict[Any, tuple[float, _Answer]] = {}
        self._pending: dict[Any, asyncio.Future[_Answer]] = {}
        self._limiter: Any = None

    def limiter(self) -> Any:
        """The bound on threads reading the store (made on the serving loop)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.threads)
        return self._limiter

    def forget(self) -> None:
        """Drop every kept answer (after a write)."""
        self._kept.clear()

    async def answer(self, key: Any, read: Callable[[], tuple[int, Any]]) -> _Answer:
        """``read()``'s (status, value) encoded (JSON; bytes stay bytes), from a kept
        answer when fresh. A StoreError is a 503 (kept too: a failing store is not asked
        again by every poll)."""
        hit = self._kept.get(key)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        future = self._pending.get(key)
        if future is None:
            future = asyncio.ensure_future(self._fill(key, read))
            self._pending[key] = future
            future.add_done_callback(functools.partial(self._done, key))
        return await asyncio.shield(future)

    def _done(self, key: Any, future: asyncio.Future[_Answer]) -> None:
        if self._pending.get(key) is future:
            del self._pending[key]
        if not future.cancelled():
            future.exception()             # retrieved: no "never retrieved" warning

    async def _fill(self, key: Any, read: Callable[[], tuple[int, Any]]) -> _Answer:
        answer = await anyio.to_thread.run_sync(_encoded, read, limiter=self.limiter())
        if self.ttl_s > 0:
            if len(self._kept) >= self.max_kept:
                now = time.monotonic()
                for old in [k for k, v in self._kept.items() if v[0] <= now]:
                    del self._kept[old]
                while len(self._kept) >= self.max_kept:
                    del self._kept[next(iter(self._kept))]
            self._kept[key] = (time.monotonic() + self.ttl_s, answer)
        return answer

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a thread under the same bound (a write, not kept)."""
        return await anyio.to_thread.run_sync(fn, *args, limiter=self.limiter())


@dataclass(frozen=True)
class _Answer:
    """An encoded answer: status, body, and the body gzipped (None: too small to)."""

    status: int
    body: bytes
    gzipped: bytes | None = None

    @classmethod
    def of(cls, status: int, body: bytes) -> _Answer:
        """The answer, gzipped too when over a kilobyte (once: every poll reuses it)."""
        return cls(status, body, gzip.compress(body, 5) if len(body) > 1024 else None)


def _encoded(read: Callable[[], tuple[int, Any]]) -> _Answer:
    try:
        status, value = read()
    except StoreError as exc:
        status, value = 503, {"error": f"store unavailable: {exc}"}
    if not isinstance(value, bytes):
        value = json.dumps(value, ensure_ascii=False, default=str).encode()
    return _Answer.of(status, value)


class StatusServer:
    """The web page and its API over one store: Starlette on uvicorn, on an event loop of
    its own (see :mod:`foreperson.observe._http` for the bounds: connections, timeouts,
    sizes, backlog).

    Args:
        store: the store to show (read from a few threads; the bundled stores allow that).
        host: the address to bind (default 127.0.0.1: this machine only).
        port: the TCP port (0: any free one; see :attr:`url`).
        allow_retry: show retry buttons and accept ``POST /api/retry``.
        metrics: serve ``/metrics`` (needs prometheus-client; None: when installed).
        allowed_hosts: the ``Host`` names answered (None: the loopback names for a
            loopback bind, else also the machine's name, FQDN and addresses); any other
            is refused with 421, so DNS rebinding cannot reach the page.
        access_token: a token every request must carry (``Authorization: Bearer``, or
            the password of HTTP basic auth); None: reads need none.
        users: user name -> token: each user logs in with their own token (basic auth
            with their name, or Bearer) and sees their own durable runs; when given, every
            request must carry a token.
        show_runs_of_all_users: show every user's durable runs to every caller (else a
            caller sees only their own: none when the page has no users).
        max_connections: connections at once (the longest-idle one is closed when full).
        cache_s: seconds a store read is reused by other requests.
        head_timeout_s: seconds a connection has to send a whole request head.
        body_timeout_s: seconds a request has to send its whole body once its head
            arrived (``POST /api/retry``; later: 408 and the connection is closed).

    Attributes:
        app: the ASGI application served (the page behind its :class:`Guard`).
        token: the page's per-process retry token (a same-origin POST must carry it in
            ``X-Foreperson-Token``), not the access token.

    Raises:
        OSError: the address cannot be bound.
        MissingDependency: starlette or uvicorn is not installed.
    """

    def __init__(self, store: TaskStore, *, host: str = "127.0.0.1", port: int = 8710,
                 allow_retry: bool = False, metrics: bool | None = None,
                 allowed_hosts: Iterable[str] | None = None, access_token: str | None = None,
                 users: Mapping[str, str] | None = None, show_runs_of_all_users: bool = False,
                 max_connections: int = MAX_CONNECTIONS, cache_s: float = CACHE_S,
                 head_timeout_s: float = HEAD_TIMEOUT_S,
                 body_timeout_s: float = BODY_TIMEOUT_S) -> None:
        self.store = store
        self.body_timeout_s = body_timeout_s
        self.allow_retry = allow_retry
        self.token = secrets.token_urlsafe(24)
        self.registry = self._registry(metrics)
        names = (frozenset(n.strip().lower().strip("[]").rstrip(".") for n in allowed_hosts)
                 if allowed_hosts is not None else default_allowed_hosts(host))
        self.access = Access(allowed_hosts=names, token=access_token or None,
                             users=dict(users or {}),
                             show_runs_of_all_users=show_runs_of_all_users)
        self.exposed = not is_loopback(host)
        if self.exposed and not self.access.needs_auth:
            log.warning("%s is not this machine only and the page has no token: whoever "
                        "reaches it reads every task's payload (foreperson serve: give "
                        "--token, $FOREPERSON_SERVE_TOKEN or --users-file)", host)
        self._reads = _Reads(cache_s, STORE_THREADS)
        page = _static("index.html").decode()
        page = page.replace("{{TOKEN}}", self.token if allow_retry else "").replace(
            "{{ALLOW_RETRY}}", "true" if allow_retry else "false")
        self._page = page.encode()
        self._files = {name: _Answer.of(200, _static(name)) for name in _STATIC}
        self.app = Guard(self._app(), self.access)
        self._http = AsgiServer(self.app, host=host, port=port,
                                max_connections=max_connections,
                                head_timeout_s=head_timeout_s)
        self.host, self.port = self._http.host, self._http.port

    def _registry(self, metrics: bool | None) -> Any:
        if metrics is False:
            return None
        from .metrics import metrics_registry

        try:
            registry, _ = metrics_registry(self.store, sink=False)
        except ImportError:
            if metrics:
                raise
            return None
        return registry

    @property
    def url(self) -> str:
        """The page's address, e.g. ``http://127.0.0.1:8710/``."""
        host = f"[{self.host}]" if ":" in str(self.host) else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or Ctrl-C in the main thread: KeyboardInterrupt)."""
        self._http.serve_forever()

    def start(self) -> StatusServer:
        """Serve from a daemon thread; returns self."""
        self._http.start()
        return self

    def shutdown(self) -> None:
        """Stop serving and close the socket (the store is left open)."""
        self._http.shutdown()

    def scope(self, identity: Identity) -> RunScope:
        """Whose durable runs ``identity`` sees on this page."""
        if self.access.show_runs_of_all_users:
            return RunScope(every=True)
        return RunScope(user=identity.user)

    # -- the application ---------------------------------------------------------------
    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.routing import Route

        def not_found(request: Any, exc: Exception) -> Any:
            status = getattr(exc, "status_code", 404)
            return _json_response(status, {"error": "not found" if status == 404
                                           else str(getattr(exc, "detail", "refused"))})

        def bad(request: Any, exc: Exception) -> Any:
            assert isinstance(exc, _Bad)
            response = _json_response(exc.status, {"error": exc.message})
            if exc.close:          # the rest of the request may never come: do not wait
                response.headers["connection"] = "close"
            return response

        def broken(request: Any, exc: Exception) -> Any:
            # Starlette answers a bug itself (then re-raises it to the guard, which logs
            # it): the answer is the page's JSON, never its plain-text default
            return _json_response(500, {"error": "internal error (see the server's log)"})

        _register_id_convertor()
        get = ["GET"]
        routes = [Route(p, self._page_view, methods=get)
                  for p in ("/", "/runs", "/task/{rest:path}", "/runs/{rest:path}")]
        routes += [Route("/static/{name}", self._static_view, methods=get),
                   Route("/api/snapshot", self._snapshot, methods=get),
                   Route("/api/history", self._history, methods=get),
                   Route("/api/tasks", self._problems, methods=get),
                   Route("/api/task/{task_id:fp_id}", self._task, methods=get),
                   Route("/api/runs", self._run_list, methods=get),
                   Route("/api/runs/{run_id:fp_id}", self._run, methods=get),
                   Route("/metrics", self._metrics, methods=get),
                   Route("/api/retry", self._retry, methods=["POST"])]
        return Starlette(routes=routes, exception_handlers={
            _Bad: bad, HTTPException: not_found, Exception: broken})

    def _run_param(self, request: Any) -> str | None:
        run = request.query_params.get("run") or None
        return None if run is None else _checked_id(run, "run")

    async def _json(self, request: Any, key: Any, read: Callable[[], tuple[int, Any]]) -> Any:
        return _reply(request, await self._reads.answer(key, read))

    async def _page_view(self, request: Any) -> Any:
        return _raw_response(200, self._page, "text/html; charset=utf-8")

    async def _static_view(self, request: Any) -> Any:
        name = request.path_params["name"]
        if name not in self._files:
            raise _Bad(404, "not found")
        return _reply(request, self._files[name], _STATIC[name],
                      {"cache-control": "max-age=300"})

    def _caller(self, request: Any) -> RunScope:
        return self.scope(request.scope["state"]["identity"])

    async def _snapshot(self, request: Any) -> Any:
        run_id = self._run_param(request)
        scope = self._caller(request)
        store, allow = self.store, self.allow_retry
        return await self._json(request, ("snapshot", run_id, scope), lambda: (
            200, {**snapshot(store, run_id=run_id, scope=scope), "allow_retry": allow}))

    async def _history(self, request: Any) -> Any:
        run_id = self._run_param(request)
        scope = self._caller(request)
        store = self.store
        return await self._json(request, ("history", run_id, scope), lambda: (
            200, history(store, run_id=run_id, scope=scope)))

    async def _problems(self, request: Any) -> Any:
        """``/api/tasks?status=dead|failed&offset=N[&limit=M][&run=ID]``: a page of the
        DEAD or FAILED tasks, the newest first."""
        query = request.query_params
        run_id = self._run_param(request)
        try:
            status = Status(query.get("status", "dead"))
            offset = int(query.get("offset", "0"))
            limit = int(query.get("limit", str(PROBLEMS_SHOWN)))
        except ValueError:
            raise _Bad(400, "status is dead or failed; offset and limit are whole "
                       "numbers") from None
        if (status not in (Status.DEAD, Status.FAILED) or not 0 <= offset <= 10**9
                or not 0 < limit <= 500):
            raise _Bad(400, "status is dead or failed, 0 <= offset <= 1e9, 0 < limit <= 500")
        scope = self._caller(request)
        store, allow = self.store, self.allow_retry
        key = ("tasks", status, offset, limit, run_id, scope)
        return await self._json(request, key, lambda: (
            200, {"status": status.value, "offset": offset, "allow_retry": allow,
                  "tasks": problems(store, status, run_id=run_id, limit=limit,
                                    offset=offset, scope=scope)}))

    def _found(self, value: dict[str, Any] | None, missing: str) -> tuple[int, Any]:
        if value is None:
            return 404, {"error": missing}
        return 200, {**value, "allow_retry": self.allow_retry}

    async def _task(self, request: Any) -> Any:
        task_id = _checked_id(request.path_params["task_id"], "task id")
        scope = self._caller(request)
        store = self.store
        return await self._json(request, ("task", task_id, scope), lambda: self._found(
            task_detail(store, task_id, scope=scope), "no such task"))

    async def _run_list(self, request: Any) -> Any:
        scope = self._caller(request)
        store = self.store
        if scope.every:
            shown, note = "all", ""
        elif scope.user is not None:
            shown, note = "user", f"the runs of {scope.user}"
        else:
            shown = "none"
            note = ("durable runs are hidden: this page has no user to show them to "
                    "(start it with --users-file for per-user logins, or with "
                    "--show-runs-of-all-users to show every user's runs)")
        return await self._json(request, ("runs", scope), lambda: (200, {
            "runs": _runs(store, scope), "shown": shown, "user": scope.user, "note": note}))

    async def _run(self, request: Any) -> Any:
        run_id = _checked_id(request.path_params["run_id"], "run id")
        scope = self._caller(request)
        store = self.store
        return await self._json(request, ("run", run_id, scope), lambda: self._found(
            _run_tree(store, run_id, scope), "no such run"))

    async def _metrics(self, request: Any) -> Any:
        if self.registry is None:
            return _raw_response(501, b"metrics need prometheus-client: "
                                 b"pip install 'foreperson[observe]'\n",
                                 "text/plain; charset=utf-8")
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        registry = self.registry
        answer = await self._reads.answer(
            ("metrics",), lambda: (200, bytes(generate_latest(registry))))
        return _reply(request, answer, CONTENT_TYPE_LATEST if answer.status == 200
                      else "application/json; charset=utf-8")

    # -- POST ----------------------------------------------------------------------------
    async def _retry(self, request: Any) -> Any:
        if not self.allow_retry:
            raise _Bad(404, "read-only (start with --allow-retry)")
        problem = self._forged(request)
        if problem is not None:
            raise _Bad(403, problem)
        body = await _body(request, self.body_timeout_s)
        try:
            value = json.loads(body or b"{}")
        except (ValueError, RecursionError):
            raise _Bad(400, "the body must be JSON (nested at most a few levels)") from None
        ids = value.get("ids") if isinstance(value, dict) else None
        every = isinstance(value, dict) and value.get("all") is True
        if every == bool(ids) or (ids is not None and not (
                isinstance(ids, list) and all(isinstance(i, str) for i in ids))):
            raise _Bad(400, 'send {"ids": [...]} or {"all": true}')
        if ids is not None:
            if len(ids) > MAX_RETRY_IDS:
                raise _Bad(400, f"at most {MAX_RETRY_IDS} ids a request")
            for task_id in ids:
                _checked_id(task_id, "task id")
        try:
            revived = await self._reads.call(_retry_shown, self.store,
                                             None if every else ids, self._caller(request))
        except StoreError as exc:
            raise _Bad(503, f"store unavailable: {exc}") from None
        self._reads.forget()
        log.info("revived %d DEAD task(s) from the web page", len(revived))
        return _json_response(200, {"revived": revived})

    def _forged(self, request: Any) -> str | None:
        """Why this POST may come from another site, or None: it must be addressed to
        this server and come from its own page (:class:`Guard` checked Host and Origin),
        be JSON (a cross-site form cannot send that without a preflight this server
        never grants) and carry the token."""
        content_type = request.headers.get("content-type") or ""
        if content_type.split(";")[0].strip().lower() != "application/json":
            return "the body must be application/json"
        token = request.headers.get("x-foreperson-token") or ""
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            return "missing or wrong token (reload the page)"
        return None


def _retry_shown(store: TaskStore, ids: list[str] | None, scope: RunScope) -> list[str]:
    """``store.retry_dead(ids)`` (None: every DEAD task) for the tasks ``scope`` sees
    (:func:`run_filter`): a task of a run it does not see is as a missing one, neither
    revived nor named in the answer.

    Returns:
        ids revived (with the dependents parked because of them) that ``scope`` sees.

    Raises:
        StoreError: the store failed.
    """
    if scope.every:
        return store.retry_dead(ids)
    shown = run_filter(store, scope)
    wanted = (store.list_tasks(status=Status.DEAD) if ids is None
              else [t for t in map(store.get, ids) if t is not None])
    allowed = {t.id for t in wanted if shown(t.run_id)}
    if not allowed:
        return []
    revived = store.retry_dead(sorted(allowed))

    def seen(task_id: str) -> bool:
        task = None if task_id in allowed else store.get(task_id)
        return task_id in allowed or (task is not None and shown(task.run_id))

    return [task_id for task_id in revived if seen(task_id)]


def _content_length(request: Any) -> int | None:
    """The request's ``Content-Length`` (None: none given).

    Raises:
        _Bad: 400 when it is not one whole number of bytes (``-1``, ``abc``, ``1, 2``):
            h11 refuses those first, this holds whatever parses the request.
    """
    values = request.headers.getlist("content-length")
    if not values:
        return None
    if len(values) > 1 or not values[0].strip().isdigit() or not values[0].isascii():
        raise _Bad(400, "Content-Length must be one whole number of bytes")
    return int(values[0])


async def _body(request: Any, timeout_s: float = BODY_TIMEOUT_S) -> bytes:
    """The request's body: at most :data:`MAX_BODY_BYTES`, within ``timeout_s`` seconds
    of the head (default :data:`BODY_TIMEOUT_S`; a client that stalls is answered 408 and
    its connection closed, whatever the keep-alive).

    Raises:
        _Bad: 400 (a malformed Content-Length, or the client went away), 413 (too big),
            408 (too slow).
    """
    from starlette.requests import ClientDisconnect

    length = _content_length(request)
    if length is not None and length > MAX_BODY_BYTES:
        raise _Bad(413, f"the body is over {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise _Bad(413, f"the body is over {MAX_BODY_BYTES} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise _Bad(408, f"the body took over {timeout_s:g} s", close=True) from None
    except ClientDisconnect:
        raise _Bad(400, "the client went away") from None
    return b"".join(chunks)


def _register_id_convertor() -> None:
    """Name ``fp_id`` the path convertor of an id: anything, slashes and newlines included
    (Starlette's ``path`` stops at a newline: that id would be a 404, not the 400 of
    :func:`_checked_id`)."""
    from starlette.convertors import PathConvertor, register_url_convertor

    class _IdConvertor(PathConvertor):
        regex = "(?s:.*)"

    register_url_convertor("fp_id", _IdConvertor())


def _raw_response(status: int, body: bytes, content_type: str = "application/json; "
                  "charset=utf-8", headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    return Response(body, status_code=status, media_type=content_type, headers=headers)


def _reply(request: Any, answer: _Answer, content_type: str = "application/json; "
           "charset=utf-8", headers: dict[str, str] | None = None) -> Any:
    """``answer`` as a response: gzipped when it was and the client accepts gzip (the page
    itself, which holds the retry token, is never compressed: no BREACH)."""
    extra = dict(headers or {})
    if answer.gzipped is None:
        return _raw_response(answer.status, answer.body, content_type, extra or None)
    extra["vary"] = "Accept-Encoding"
    if "gzip" in (request.headers.get("accept-encoding") or "").lower():
        extra["content-encoding"] = "gzip"
        return _raw_response(answer.status, answer.gzipped, content_type, extra)
    return _raw_response(answer.status, answer.body, content_type, extra)


def _json_response(status: int, value: Any) -> Any:
    return _raw_response(status, json.dumps(value, ensure_ascii=False, default=str).encode())


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


_STATIC = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
