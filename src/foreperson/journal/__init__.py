"""The step journal: what happened *inside* one unit of work, recorded for replay.

A step is one model call, tool call, approval, spawn or delegation of a run. It is not
a task: recording one never makes a claimable row. Each step has a deterministic key,
the run id plus a step path that says which agent, which turn and which call
(``"agent:researcher/turn:3/tool:1"``), so a replay of the same run reaches the same keys
in the same order.

This module is pure data: the :class:`Step` record, the :class:`Journal` protocol that
the work layer's stores implement (memory, SQLite, PostgreSQL: same connection, same
migrations as the tasks), the :class:`RunRecord` of a durable run and the
:class:`RunLedger` protocol that keeps them (``foreperson.runtime``'s runs: who they
belong to, who runs them now, how they ended), and :func:`request_digest`. It imports
nothing of foreperson but the error tree, so the agent layer can take a journal by
injection without ever importing the work layer.

Format versions (STYLE 5: version what you persist): a step and a run record carry
``version``; a store refuses to hand back a record whose version this foreperson does
not know (:class:`UnknownStepVersion`), rather than replaying something it cannot read.

Growth: a step records its own result and a compact summary of its request (digests
in place of anything long, :func:`compact_request`), never the conversation that led
to it, so a run's journal grows linearly in its steps (seed 001: a replay must not
drag the whole history along with every step).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ..errors import ForepersonError, RunError

__all__ = [
    "KNOWN_RUN_VERSIONS",
    "KNOWN_VERSIONS",
    "RUN_STATUSES",
    "RUN_VERSION",
    "STEP_VERSION",
    "Journal",
    "JournalDivergence",
    "RunLedger",
    "RunRecord",
    "Step",
    "UnknownStepVersion",
    "check_run_version",
    "check_version",
    "compact_request",
    "describe_divergence",
    "request_digest",
]

STEP_VERSION = 1
"""The step format this foreperson writes and reads."""

KNOWN_VERSIONS = frozenset({1})
"""The step formats this foreperson can replay."""

RUN_VERSION = 1
"""The run record format this foreperson writes and reads."""

KNOWN_RUN_VERSIONS = frozenset({1})
"""The run record formats this foreperson can resume."""

RUN_STATUSES = ("running", "waiting", "completed", "failed", "interrupted")
"""A run record's ``status``: ``running`` (a process owns it now, or did when it died:
its lease says), ``waiting`` (parked on a human approval; no process needed),
``completed`` (it ended with a result, whatever its stop reason), ``failed`` (it raised;
resuming it runs its unfinished steps again) and ``interrupted`` (it was cancelled)."""


class UnknownStepVersion(ForepersonError):
    """A journal holds a step in a format this foreperson does not know (written by a
    newer version): upgrade foreperson before replaying that run.

    Attributes:
        run_id: the run.
        key: the step's key.
        version: the format version found.
    """

    def __init__(self, run_id: str, key: str, version: int) -> None:
        super().__init__(
            f"run {run_id}: step {key!r} has journal format version {version}; this "
            f"foreperson reads {sorted(KNOWN_VERSIONS)}: upgrade foreperson to replay it")
        self.run_id = run_id
        self.key = key
        self.version = version


class JournalDivergence(RunError):
    """A replayed step asked for something other than what was recorded under its key
    (the code or the inputs changed between the run and its replay), so the recorded
    result cannot stand in for it: the replay stops here rather than mixing two
    histories (STYLE 6).

    Attributes:
        run_id: the run.
        key: the step's key: which step diverged.
        recorded: the digest recorded with the step.
        replayed: the digest of the request made on replay.
        detail: how it diverged (what differs between the recorded request and this
            one, see :func:`describe_divergence`), or None when the record has no
            request summary to compare.
    """

    def __init__(self, run_id: str, key: str, recorded: str, replayed: str,
                 detail: str | None = None) -> None:
        how = f": {detail}" if detail else ""
        super().__init__(
            f"run {run_id}: step {key!r} diverged on replay{how} (recorded request "
            f"{recorded[:12]}, now {replayed[:12]}): the code or the inputs changed since "
            "the run was recorded; undo the change to resume this run, or start a new run id")
        self.run_id = run_id
        self.key = key
        self.recorded = recorded
        self.replayed = replayed
        self.detail = detail


@dataclass(frozen=True)
class Step:
    """One journaled step of a run.

    Attributes:
        run_id: the run it belongs to.
        key: the step path, unique within the run and the same on every replay.
        kind: what it was (``"model_call"``, ``"tool_call"``, ``"approval"``,
            ``"spawn"``, ``"delegation"``, ``"checkpoint"`` …); open to the layers above.
        digest: :func:`request_digest` of the request, to detect a divergent replay.
        result: the step's JSON result.
        version: the record's format version (:data:`STEP_VERSION`).
        created_at: when it was recorded (UTC); None before the store has it.
        seq: its position in the run's journal (set by the store; increasing, not
            necessarily consecutive).
        request: :func:`compact_request` of what the step asked (JSON), so a divergent
            replay can say how it differs; None for records written without one.
    """

    run_id: str
    key: str
    kind: str
    digest: str
    result: Any
    version: int = STEP_VERSION
    created_at: datetime | None = None
    seq: int | None = None
    request: Any = None


def check_version(step: Step) -> Step:
    """``step`` when its format version is known.

    Raises:
        UnknownStepVersion: it is not.
    """
    if step.version not in KNOWN_VERSIONS:
        raise UnknownStepVersion(step.run_id, step.key, step.version)
    return step


def check_run_version(record: RunRecord) -> RunRecord:
    """``record`` when its format version is known.

    Raises:
        UnknownStepVersion: it is not (the key named is ``"(run record)"``).
    """
    if record.version not in KNOWN_RUN_VERSIONS:
        raise UnknownStepVersion(record.run_id, "(run record)", record.version)
    return record


def request_digest(request: Any) -> str:
    """SHA-256 (hex) of ``request`` as canonical JSON (sorted keys, no spaces).

    Raises:
        TypeError: ``request`` is not JSON-serialisable.
    """
    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=_reject)
    return hashlib.sha256(blob.encode()).hexdigest()


def _reject(value: Any) -> Any:
    raise TypeError(f"a journaled request must be JSON, got {type(value).__name__}")


_SMALL = 240        # characters of JSON a summary keeps as it is


def _short(value: Any) -> Any:
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=_reject)
    if len(blob) <= _SMALL:
        return value
    return {"digest": hashlib.sha256(blob.encode()).hexdigest()[:16], "chars": len(blob)}


def compact_request(request: Any) -> Any:
    """A bounded summary of a step's request, recorded with the step so that a divergent
    replay can say how it differs: a dict keeps its keys, each value kept when its JSON
    is at most 240 characters, else replaced by ``{"digest", "chars"}``; anything else
    is kept or replaced the same way. The full request is never stored (only its
    digest), so the journal stays linear in the number of steps.

    Args:
        request: the request (JSON values).

    Returns:
        The summary (JSON values, a few hundred bytes at most per key).

    Raises:
        TypeError: ``request`` is not JSON-serialisable.
    """
    if isinstance(request, dict):
        return {str(k): _short(v) for k, v in request.items()}
    return _short(request)


_EXPLAIN = {
    "system": "the system message (the agent's instructions) differs",
    "latest": "the messages added since the previous model call differ (the prompt, a "
              "tool result or an earlier reply changed)",
    "conversation": "an earlier part of the conversation differs",
    "tools": "the tools offered to the model differ (a name, description or schema)",
    "output_schema": "the output type's JSON schema differs",
}


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def describe_divergence(recorded: Any, replayed: Any) -> str | None:
    """How a replayed request differs from the recorded one, in words (for
    :class:`JournalDivergence`).

    Args:
        recorded: the summary recorded with the step (:attr:`Step.request`).
        replayed: :func:`compact_request` of the request made on replay.

    Returns:
        One line naming what differs (for a model call: the instructions, the messages
        since the previous call, an earlier part of the conversation, the tools, the
        output schema; otherwise each differing field with its recorded and current
        value), or None when nothing was recorded to compare.
    """
    if recorded is None:
        return None
    if not (isinstance(recorded, dict) and isinstance(replayed, dict)):
        return f"recorded {_show(recorded)}, now {_show(replayed)}"
    differ = [k for k in sorted(set(recorded) | set(replayed))
              if recorded.get(k) != replayed.get(k)]
    if "system" in differ or "latest" in differ:
        differ = [k for k in differ if k not in ("conversation", "messages")]
    parts: list[str] = []
    for key in differ:
        if key == "tool_names":
            parts.append(f"the tools offered differ: recorded {_show(recorded.get(key))}, "
                         f"now {_show(replayed.get(key))}")
        elif key == "tools" and "tool_names" in differ:
            continue
        elif key in _EXPLAIN:
            parts.append(_EXPLAIN[key])
        elif key == "messages":
            parts.append(f"the conversation has {replayed.get(key)} messages, "
                         f"{recorded.get(key)} were recorded")
        else:
            parts.append(f"{key}: recorded {_show(recorded.get(key))}, "
                         f"now {_show(replayed.get(key))}")
    return "; ".join(parts) if parts else None


@runtime_checkable
class Journal(Protocol):
    """Where steps are recorded: one store, the same connection and migrations as the
    tasks. Blocking, like :class:`~foreperson.work.store.TaskStore` (async code calls it
    through ``anyio.to_thread``).

    Writes are first-wins: two processes replaying the same run cannot record two
    different results under one key.
    """

    def get_step(self, run_id: str, key: str) -> Step | None:
        """The recorded step, or None.

        Raises:
            UnknownStepVersion: it was written in a format this foreperson cannot read.
            StoreError: the store failed.
        """
        ...

    def put_step(self, step: Step) -> Step:
        """Record ``step`` unless its key is already recorded for the run.

        Returns:
            the step as stored: ``step`` (with ``created_at`` and ``seq``), or the one
            recorded earlier under the same key (first write wins).

        Raises:
            UnknownStepVersion: an earlier record under that key has an unknown format.
            TypeError: ``step.result`` is not JSON.
            StoreError: the store failed.
        """
        ...

    def list_steps(self, run_id: str) -> list[Step]:
        """Every step of the run, in the order they were recorded.

        Raises:
            UnknownStepVersion: one of them has an unknown format.
            StoreError: the store failed.
        """
        ...


@dataclass(frozen=True)
class RunRecord:
    """One durable run, as a :class:`RunLedger` keeps it (``foreperson.runtime``).

    Seed 001 (tenant pinning): a run belongs to one ``user_id`` from its first record
    on; every journal entry of the run (its steps, the steps of the runs nested in it)
    is keyed by its run id, so belongs to that user too.

    Attributes:
        run_id: the run (the journal's run id of its steps).
        agent: the name of the agent (or team) that runs it.
        user_id: the user it belongs to; None: an anonymous run.
        status: one of :data:`RUN_STATUSES`.
        input: what it was asked, JSON: ``{"prompt": ..., "message_history": [...]}``,
            so a resume needs only the run id.
        result: how it ended, JSON (its output, text, stop reason, usage), or None
            while it has not.
        error: the error it raised (``failed``), or None.
        stop_reason: its result's stop reason (``"awaiting_approval"`` while waiting),
            or None.
        owner: the process that runs it now (``host:pid:nonce``), or None.
        lease_expires_at: when the owner's claim lapses unless renewed (UTC), or None.
        version: the record's format version (:data:`RUN_VERSION`).
        created_at: when it was first recorded (UTC; set by the store).
        updated_at: its last change (UTC; set by the store).
    """

    run_id: str
    agent: str
    user_id: str | None = None
    status: str = "running"
    input: Any = None
    result: Any = None
    error: str | None = None
    stop_reason: str | None = None
    owner: str | None = None
    lease_expires_at: datetime | None = None
    version: int = RUN_VERSION
    created_at: datetime | None = None
    updated_at: datetime | None = None


@runtime_checkable
class RunLedger(Protocol):
    """Where durable runs are kept, beside their steps (the work layer's stores, same
    database, same migrations). Blocking, like :class:`Journal`.

    A run is owned by at most one process at a time: :meth:`claim_run` takes it (when
    nobody holds it, or the holder's lease lapsed), :meth:`renew_run` keeps it,
    :meth:`end_run` records how it ended and lets it go; the latter two succeed only
    for the current owner (fencing, as a task's lease token).
    """

    def create_run(self, record: RunRecord) -> RunRecord:
        """Record a new run unless its id is recorded already (first write wins: the
        user a run belongs to never changes).

        Returns:
            The record as stored (``record``, or the earlier one).

        Raises:
            UnknownStepVersion: the earlier record has an unknown format.
            TypeError: ``record.input`` is not JSON.
            StoreError: the store failed.
        """
        ...

    def get_run(self, run_id: str) -> RunRecord | None:
        """The run's record, or None.

        Raises:
            UnknownStepVersion: it has an unknown format.
            StoreError: the store failed.
        """
        ...

    def list_runs(self, *, user_id: str | None = None, status: str | None = None,
                  limit: int = 100) -> list[RunRecord]:
        """Runs, newest first.

        Args:
            user_id: only this user's (None: every user's, anonymous runs included).
            status: only runs in this status.
            limit: at most this many.

        Raises:
            StoreError: the store failed.
        """
        ...

    def claim_run(self, run_id: str, owner: str, lease_s: float, *,
                  take_from: str | None = None) -> RunRecord | None:
        """Become the run's owner for ``lease_s`` seconds (the store's clock): when it has
        no owner, its owner's lease lapsed, ``owner`` holds it already, or its owner is
        ``take_from`` (a holder the caller knows is dead). Its status becomes
        ``running``.

        Returns:
            The record now owned, or None when another owner holds it (or there is no
            such run).

        Raises:
            StoreError: the store failed.
        """
        ...

    def renew_run(self, run_id: str, owner: str, lease_s: float) -> bool:
        """Extend ``owner``'s lease to ``lease_s`` seconds from now.

        Returns:
            False when ``owner`` no longer holds the run.
        """
        ...

    def end_run(self, run_id: str, owner: str, status: str, *, result: Any = None,
                error: str | None = None, stop_reason: str | None = None) -> bool:
        """Record how the run ended (``status``, ``result``, ``error``, ``stop_reason``)
        and give up ownership.

        Returns:
            False when ``owner`` no longer holds the run (nothing is written).

        Raises:
            TypeError: ``result`` is not JSON.
            StoreError: the store failed.
        """
        ...
