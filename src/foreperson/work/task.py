"""The task record: one durable row per unit of work (seed 000, "the task record")."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from ..clock import Clock, SystemClock
from ..errors import InvalidPlan
from ..telemetry import current_carrier

__all__ = ["Clock", "Status", "SystemClock", "Task", "from_epoch", "to_epoch"]


class Status(str, Enum):  # noqa: UP042 - seed 000's shape; str() stays the member name
    """Where a task is in its life.

    PENDING    created, waiting for its dependencies or a worker
    ASSIGNED   given to a worker (a lease is held), not yet started
    RUNNING    the worker has begun
    COMPLETED  done; never run again
    FAILED     this attempt failed and a retry is scheduled at ``not_before``
    DEAD       we gave up (retries exhausted, a non-retryable error, or a dead
               dependency); parked for a human with its last error
    """

    PENDING = "pending"
    ASSIGNED = "assigned"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    DEAD = "dead"

    @property
    def finished(self) -> bool:
        """True for COMPLETED and DEAD: nothing more will happen to the task."""
        return self in (Status.COMPLETED, Status.DEAD)

    @property
    def active(self) -> bool:
        """True for ASSIGNED and RUNNING: a worker holds the lease."""
        return self in (Status.ASSIGNED, Status.RUNNING)


def _new_id() -> str:
    return str(uuid.uuid4())


@dataclass
class Task:
    """One unit of work, with everything needed to retry, reclaim and audit it.

    Attributes:
        kind: which worker capability is needed (e.g. ``"classify_ticket"``).
        payload: the arguments, a JSON object.
        id: unique id; a random UUID unless given (give one to make adds idempotent).
        status: see :class:`Status`.
        assigned_to: name of the worker holding the lease, or None.
        attempts: attempts started so far (counted when the task is claimed).
        max_attempts: attempts allowed before the task goes DEAD; default 3.
        result: the worker's JSON result once COMPLETED.
        error: the last attempt's error text.
        heartbeat_at: last sign of life from the worker (UTC).
        depends_on: ids of tasks that must be COMPLETED before this one is ready.
        locks: names of resources this task needs alone (an output row, a file):
            two tasks sharing a lock never run at the same time.
        created_at / started_at / finished_at: UTC timestamps.
        not_before: the task is not claimed before this time (retry backoff).
        estimate_s: expected duration in seconds, used as load; None = learn per kind.
        errors: every failed attempt, ``{"attempt", "error", "at"}`` (``at`` in ISO 8601).
        lease_token: proof of the current claim; every write after a claim must carry
            it, so a worker that lost its lease can neither complete, fail nor heartbeat.
        run_id: the run the task belongs to (a batch job, an agent run); None for work
            outside any run. ``stats(run_id=)`` and ``finished(run_id=)`` scope to it.
        parent_id: the task that submitted this one (a child task), or None.
        reason: why the task is in its status, a :class:`~foreperson.work.policy.Reason`
            code (``"dependency_dead"``, ``"retries_exhausted"``, ``"not_retryable"``,
            ``"lease_expired"``, ``"released"``, ``"rate_limited"``, ``"retrying"``,
            ``"revived"``), or None.
        stale_after: this task's lease in seconds: a holder that does not heartbeat for
            that long is presumed dead and the task is reclaimed (seed 000: three to five
            times the p99 duration). None = its kind's default, else the claiming
            worker's ``stale_after``.
        lease_expires_at: when the current lease expires unless renewed by a heartbeat
            (UTC; the store's clock), or None when nobody holds the task.
        awaited: someone waits for this task's result (:meth:`Supervisor.submit`); a
            store that can (PostgreSQL) notifies waiters in other processes when it ends.
        trace_context: the OpenTelemetry span that was current when the task was made, as
            a W3C ``traceparent`` carrier (None without tracing): the task's execution
            span is its child, in whichever process runs it. Not part of the task's
            identity: re-adding an id from another trace is the same work.
    """

    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=_new_id)
    status: Status = Status.PENDING
    assigned_to: str | None = None
    attempts: int = 0
    max_attempts: int = 3
    result: Any = None
    error: str | None = None
    heartbeat_at: datetime | None = None
    depends_on: list[str] = field(default_factory=list)
    locks: list[str] = field(default_factory=list)
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    not_before: datetime | None = None
    estimate_s: float | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    lease_token: str | None = None
    run_id: str | None = None
    parent_id: str | None = None
    reason: str | None = None
    stale_after: float | None = None
    lease_expires_at: datetime | None = None
    awaited: bool = False
    trace_context: dict[str, str] | None = field(default_factory=current_carrier)

    def check(self) -> None:
        """Validate the record before it is stored.

        Raises:
            InvalidPlan: empty kind, a payload that is not a JSON object, a task that
                depends on itself, max_attempts < 1, a negative estimate or a
                ``stale_after`` that is not a positive number of seconds.
        """
        if not isinstance(self.kind, str) or not self.kind:
            raise InvalidPlan("task kind must be a non-empty string", task_id=self.id)
        if not isinstance(self.payload, dict):
            raise InvalidPlan(
                f"task {self.id}: payload must be a JSON object (dict), "
                f"got {type(self.payload).__name__}", task_id=self.id)
        try:
            json.dumps(self.payload, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidPlan(f"task {self.id}: payload is not JSON: {exc}",
                              task_id=self.id) from exc
        if self.id in self.depends_on:
            raise InvalidPlan(f"task {self.id} depends on itself", task_id=self.id)
        if self.max_attempts < 1:
            raise InvalidPlan(f"task {self.id}: max_attempts must be >= 1", task_id=self.id)
        if self.estimate_s is not None and not self.estimate_s >= 0:
            raise InvalidPlan(f"task {self.id}: estimate_s must be >= 0 seconds",
                              task_id=self.id)
        if self.stale_after is not None and not 0 < self.stale_after < 1e9:
            raise InvalidPlan(f"task {self.id}: stale_after must be > 0 seconds (a lease a "
                              "holder renews by heartbeating), got "
                              f"{self.stale_after}", task_id=self.id)

    @property
    def claim_key(self) -> str:
        """Key for side effects that must happen once per task (seed 000: derived from
        the task id, so every attempt and every reclaim shares it)."""
        return f"task:{self.id}"


def from_epoch(value: float | None) -> datetime | None:
    """Epoch seconds -> timezone-aware UTC datetime (None passes through)."""
    return None if value is None else datetime.fromtimestamp(value, UTC)


def to_epoch(value: datetime | None) -> float | None:
    """Timezone-aware datetime -> epoch seconds (naive datetimes are taken as UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()
