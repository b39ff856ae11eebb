"""The step journal: what happened *inside* one unit of work, recorded for replay.

A step is one model call, tool call, approval, spawn or delegation of a run. It is not
a task: recording one never makes a claimable row (DESIGN, "one record under
everything"). Each step has a deterministic key, the run id plus a step path that says
which agent, which turn and which call (``"agent:researcher/turn:3/tool:1"``), so a
replay of the same run reaches the same keys in the same order.

This module is pure data: the :class:`Step` record, the :class:`Journal` protocol that
the work layer's stores implement (memory, SQLite, PostgreSQL: same connection, same
migrations as the tasks), and :func:`request_digest`. It imports nothing of foreperson
but the error tree, so the agent layer can take a journal by injection without ever
importing the work layer.

Format versions (STYLE 5: version what you persist): a step carries ``version``; a
store refuses to hand back a step whose version this foreperson does not know
(:class:`UnknownStepVersion`), rather than replaying something it cannot read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ..errors import ForepersonError, RunError

__all__ = [
    "KNOWN_VERSIONS",
    "STEP_VERSION",
    "Journal",
    "JournalDivergence",
    "Step",
    "UnknownStepVersion",
    "check_version",
    "request_digest",
]

STEP_VERSION = 1
"""The step format this foreperson writes and reads."""

KNOWN_VERSIONS = frozenset({1})
"""The step formats this foreperson can replay."""


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
    result cannot stand in for it.

    Attributes:
        run_id: the run.
        key: the step's key.
        recorded: the digest recorded with the step.
        replayed: the digest of the request made on replay.
    """

    def __init__(self, run_id: str, key: str, recorded: str, replayed: str) -> None:
        super().__init__(
            f"run {run_id}: step {key!r} diverged on replay (recorded request "
            f"{recorded[:12]}, now {replayed[:12]}): the code or the inputs changed since "
            "the run was recorded; start a new run id")
        self.run_id = run_id
        self.key = key
        self.recorded = recorded
        self.replayed = replayed


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
        seq: its position in the run's journal, from 1 (set by the store).
    """

    run_id: str
    key: str
    kind: str
    digest: str
    result: Any
    version: int = STEP_VERSION
    created_at: datetime | None = None
    seq: int | None = None


def check_version(step: Step) -> Step:
    """``step`` when its format version is known.

    Raises:
        UnknownStepVersion: it is not.
    """
    if step.version not in KNOWN_VERSIONS:
        raise UnknownStepVersion(step.run_id, step.key, step.version)
    return step


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
