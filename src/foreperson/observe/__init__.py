"""Looking at the work: the web page of ``foreperson serve``, Prometheus metrics and
terminal charts, for batch jobs and agent runs alike (seed 000's three numbers: tasks by
status over time, active tasks per worker, age of the oldest unfinished task).

Spans are made by the library itself through :mod:`foreperson.telemetry` (the
OpenTelemetry API, a no-op until the application installs the SDK).

* :class:`StatusServer` (``foreperson serve``): the page and its JSON API, on Starlette
  and uvicorn (:func:`raise_open_file_limit` lets a process hold many idle connections);
* :func:`metrics_registry`, :class:`PrometheusSink`, :class:`StoreCollector`,
  :func:`serve_metrics`: ``/metrics`` (``pip install 'foreperson[observe]'``);
* :func:`render_charts` (``foreperson status --watch``): the three numbers as terminal
  charts;
* :class:`AsgiServer`, :class:`Guard`, :class:`Access`: the bounded HTTP edge (Host,
  origin and token checks) the page, ``/metrics`` and ``foreperson mcp serve`` share.
"""

from ._http import (
    Access,
    AsgiServer,
    Guard,
    default_allowed_hosts,
    is_loopback,
    raise_open_file_limit,
)
from .metrics import PrometheusSink, StoreCollector, metrics_registry, serve_metrics
from .server import StatusServer, snapshot, task_detail
from .watch import render_charts, watch

__all__ = ["Access", "AsgiServer", "Guard", "PrometheusSink", "StatusServer", "StoreCollector",
           "default_allowed_hosts", "is_loopback", "metrics_registry",
           "raise_open_file_limit", "render_charts", "serve_metrics", "snapshot",
           "task_detail", "watch"]
