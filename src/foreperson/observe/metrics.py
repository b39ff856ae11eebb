"""Prometheus metrics: what this process did (a :class:`PrometheusSink` of the library's
metric events) and what the store holds (a :class:`StoreCollector`, read at each scrape).

Names (``prometheus-client`` is imported lazily: ``pip install 'foreperson[observe]'``):

==================================================  ========  =========================
metric                                              type      labels
==================================================  ========  =========================
``foreperson_tasks``                                gauge     ``status``, ``kind``
``foreperson_worker_active_tasks``                  gauge     ``worker``
``foreperson_oldest_unfinished_task_age_seconds``   gauge
``foreperson_task_claim_to_start_seconds``          histogram ``kind``
``foreperson_task_run_seconds``                     histogram ``kind``, ``outcome``
``foreperson_task_retries_total``                   counter   ``kind``
``foreperson_task_dead_total``                      counter   ``kind``
``foreperson_task_reclaims_total``                  counter
``foreperson_model_calls_total``                    counter   ``model``
``foreperson_model_tokens_total``                   counter   ``model``, ``type``
==================================================  ========  =========================

The three gauges are seed 000's three numbers, read from the store, so every process
that serves ``/metrics`` over one store reports the same values; the histograms and
counters count what the serving process itself did (sum them across processes).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import MissingDependency, StoreError
from ..work.store import ReportsWork, TaskStore

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["RUN_BUCKETS_S", "WAIT_BUCKETS_S", "PrometheusSink", "StoreCollector",
           "metrics_registry", "prometheus", "serve_metrics"]

RUN_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                 60.0, 300.0, 900.0, 3600.0)
"""Buckets of the run-time histogram, seconds (a no-op task to an hour-long one)."""

WAIT_BUCKETS_S = (0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 2.0, 5.0, 30.0)
"""Buckets of the claim-to-start histogram, seconds (a prefetched task waits for a slot)."""


def prometheus() -> Any:
    """The ``prometheus_client`` module.

    Raises:
        MissingDependency: it is not installed.
    """
    try:
        import prometheus_client
    except ImportError as exc:
        raise MissingDependency("metrics need prometheus-client: "
                                "pip install 'foreperson[observe]'") from exc
    return prometheus_client


class PrometheusSink:
    """A :class:`foreperson.telemetry.MetricsSink` that counts into Prometheus metrics.

    Args:
        registry: where the metrics are registered (a new ``CollectorRegistry`` if None).

    Raises:
        MissingDependency: prometheus-client is not installed.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        prom = prometheus()
        self.registry = registry if registry is not None else prom.CollectorRegistry()
        r = self.registry
        self.claim_to_start = prom.Histogram(
            "foreperson_task_claim_to_start_seconds",
            "Seconds from a task's claim by this process to the start of its attempt.",
            ["kind"], buckets=WAIT_BUCKETS_S, registry=r)
        self.run_time = prom.Histogram(
            "foreperson_task_run_seconds", "Seconds one attempt of a task ran, by outcome.",
            ["kind", "outcome"], buckets=RUN_BUCKETS_S, registry=r)
        self.retries = prom.Counter("foreperson_task_retries",
                                    "Failed attempts scheduled again (FAILED).", ["kind"],
                                    registry=r)
        self.dead = prom.Counter("foreperson_task_dead",
                                 "Tasks this process gave up on (DEAD).", ["kind"], registry=r)
        self.reclaims = prom.Counter("foreperson_task_reclaims",
                                     "Tasks taken back after their holder's lease expired.",
                                     registry=r)
        self.model_calls = prom.Counter("foreperson_model_calls", "Model calls made.",
                                        ["model"], registry=r)
        self.tokens = prom.Counter("foreperson_model_tokens", "Tokens spent, by type.",
                                   ["model", "type"], registry=r)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            with self._lock:
                child = self._children[key] = metric.labels(*labels)
        return child

    def task_started(self, kind: str, waited_s: float) -> None:
        """See :meth:`foreperson.telemetry.MetricsSink.task_started`."""
        self._child(self.claim_to_start, kind).observe(waited_s)

    def task_finished(self, kind: str, outcome: str, run_s: float) -> None:
        """See :meth:`foreperson.telemetry.MetricsSink.task_finished`."""
        self._child(self.run_time, kind, outcome).observe(run_s)

    def task_retried(self, kind: str) -> None:
        """See :meth:`foreperson.telemetry.MetricsSink.task_retried`."""
        self._child(self.retries, kind).inc()

    def task_dead(self, kind: str) -> None:
        """See :meth:`foreperson.telemetry.MetricsSink.task_dead`."""
        self._child(self.dead, kind).inc()

    def tasks_reclaimed(self, count: int) -> None:
        """See :meth:`foreperson.telemetry.MetricsSink.tasks_reclaimed`."""
        self.reclaims.inc(count)

    def model_call(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """See :meth:`foreperson.telemetry.MetricsSink.model_call`."""
        self._child(self.model_calls, model).inc()
        self._child(self.tokens, model, "input").inc(input_tokens)
        self._child(self.tokens, model, "output").inc(output_tokens)


class StoreCollector:
    """Seed 000's three numbers, read from ``store`` at every scrape: tasks by status
    and kind, active tasks per worker, and the age of the oldest unfinished task.

    Args:
        store: the store to read (its ``stats()``, and ``counts_by_kind()`` when it
            has it; else counts by status under ``kind="*"``).
        run_id: read only this run's tasks (None: the whole store).
    """

    def __init__(self, store: TaskStore, *, run_id: str | None = None) -> None:
        self.store = store
        self.run_id = run_id

    def describe(self) -> list[Any]:
        """Nothing up front: the metrics are read from the store when scraped."""
        return []

    def collect(self) -> Iterator[Any]:
        """Yield the three gauges (an unreachable store yields nothing this scrape)."""
        from prometheus_client.core import GaugeMetricFamily

        try:
            stats = self.store.stats(run_id=self.run_id)
            by_kind = (self.store.counts_by_kind(run_id=self.run_id)
                       if isinstance(self.store, ReportsWork) else {"*": stats.counts})
        except StoreError:
            return
        tasks = GaugeMetricFamily("foreperson_tasks", "Tasks by status and kind, now.",
                                  labels=["status", "kind"])
        for kind, counts in sorted(by_kind.items()):
            for status, n in counts.items():
                tasks.add_metric([status.value, kind], n)
        yield tasks
        active = GaugeMetricFamily("foreperson_worker_active_tasks",
                                   "Tasks each worker holds (ASSIGNED or RUNNING), now.",
                                   labels=["worker"])
        for name in sorted(set(stats.active_by_worker) | set(stats.workers)):
            active.add_metric([name], stats.active_by_worker.get(name, 0))
        yield active
        age = stats.oldest_unfinished_age_s
        yield GaugeMetricFamily("foreperson_oldest_unfinished_task_age_seconds",
                                "Age of the oldest task neither COMPLETED nor DEAD (0: none).",
                                value=0.0 if age is None else age)


def metrics_registry(store: TaskStore | None, *, sink: bool = True,
                     run_id: str | None = None) -> tuple[Any, PrometheusSink | None]:
    """A registry with the store's gauges (when ``store`` is given) and, with ``sink``,
    a :class:`PrometheusSink` installed in :mod:`foreperson.telemetry`.

    Returns:
        ``(registry, sink or None)``; remove the sink with
        ``telemetry.remove_sink(sink)`` when done.

    Raises:
        MissingDependency: prometheus-client is not installed.
    """
    from .. import telemetry

    prom = prometheus()
    registry = prom.CollectorRegistry()
    if store is not None:
        registry.register(StoreCollector(store, run_id=run_id))
    installed = None
    if sink:
        installed = PrometheusSink(registry)
        telemetry.add_sink(installed)
    return registry, installed


def serve_metrics(registry: Any, port: int, host: str = "127.0.0.1", *,
                  allowed_hosts: Iterable[str] | None = None) -> Any:
    """Serve ``registry`` at ``http://host:port/metrics`` from a daemon thread (Starlette
    on uvicorn, with the page's bounds), answering only requests whose ``Host`` is one of
    ``allowed_hosts`` (default: as the page's, see
    :func:`foreperson.observe._http.default_allowed_hosts`), so DNS rebinding cannot read
    it whatever the bind address. Each scrape is generated in a thread.

    Returns:
        the server (``shutdown()`` stops it; ``server_close()`` closes its socket).

    Raises:
        OSError: the port is taken.
        MissingDependency: prometheus-client, starlette or uvicorn is not installed.
    """
    from ._http import Access, AsgiServer, Guard, default_allowed_hosts

    prom = prometheus()
    names = (frozenset(n.strip().lower().strip("[]").rstrip(".") for n in allowed_hosts)
             if allowed_hosts is not None else default_allowed_hosts(host))
    server = AsgiServer(Guard(_metrics_app(prom, registry), Access(allowed_hosts=names),
                              realm="foreperson metrics"), host=host, port=port)
    return server.start()


def _metrics_app(prom: Any, registry: Any) -> Any:
    """``GET /metrics`` (and ``/``): the registry in Prometheus' text format."""
    import anyio.to_thread
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    limiter = anyio.CapacityLimiter(2)

    async def scrape(request: Any) -> Response:
        body = await anyio.to_thread.run_sync(prom.generate_latest, registry, limiter=limiter)
        return Response(body, media_type=prom.CONTENT_TYPE_LATEST)

    return Starlette(routes=[Route("/metrics", scrape), Route("/", scrape)])
