"""Every error foreperson raises, in one tree.

::

    ForepersonError
    ├── ConfigurationError          raised at construction or load; fix the input
    │   ├── InvalidPlan             unknown kind, unknown dependency, cycle, bad payload
    │   ├── InputError              a malformed input file (path, line)
    │   └── MissingDependency       an optional extra is not installed
    ├── RunError                    raised while work runs
    │   └── LeaseLost               this worker no longer holds the task's lease
    └── StoreError                  the task store failed; the driver error is __cause__

Signals raised *by user code* inside a task stand outside the tree, with imperative
names: :class:`Retry` (retry this task, optionally after a delay) and :class:`GiveUp`
(do not retry: park the task DEAD now).
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "ForepersonError",
    "GiveUp",
    "InputError",
    "InvalidPlan",
    "LeaseLost",
    "MissingDependency",
    "Retry",
    "RunError",
    "StoreError",
]


class ForepersonError(Exception):
    """Root of every error foreperson raises."""


class ConfigurationError(ForepersonError):
    """Something the user wrote (a task, a plan, a file, an option) cannot be used.

    Raised before any work starts, so nothing already accepted is lost.
    """


class InvalidPlan(ConfigurationError):
    """A task or a plan of tasks cannot be run as given.

    Attributes:
        task_id: the offending task's id, when one task is to blame.
    """

    def __init__(self, message: str, *, task_id: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id


class InputError(ConfigurationError):
    """An input file is malformed.

    Attributes:
        path: the file.
        line: 1-based line number where the problem was found, or None.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class MissingDependency(ConfigurationError):
    """An optional extra is needed; the message names the ``pip install`` that fixes it."""


class RunError(ForepersonError):
    """Raised while work is running."""


class LeaseLost(RunError):
    """The task was reclaimed or finished by someone else; this worker's write was refused.

    Attributes:
        task_id: the task whose lease is gone.
    """

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"task {task_id}: lease lost (the task was reclaimed after stale_after, "
            "or finished elsewhere); this worker's result was discarded"
        )
        self.task_id = task_id


class StoreError(ForepersonError):
    """The task store failed. The driver's own exception is kept as ``__cause__``."""


class Retry(Exception):  # noqa: N818 - a signal, named as an imperative
    """Raise inside a task to ask for another attempt.

    Args:
        reason: why, recorded with the attempt.
        after_s: seconds to wait before the next attempt; None uses the backoff.
    """

    def __init__(self, reason: str = "retry requested", *, after_s: float | None = None) -> None:
        super().__init__(reason)
        self.after_s = after_s


class GiveUp(Exception):  # noqa: N818 - a signal, named as an imperative
    """Raise inside a task to park it DEAD at once, with ``reason``, without retrying."""
