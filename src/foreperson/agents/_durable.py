"""The seam between an agent's run and a durable runtime (``foreperson.runtime``).

``agent.run(prompt, runtime=..., run_id=...)`` hands the run to the runtime: it opens a
:class:`RunSession` (the run's record, checked against the user; the run's ownership;
a journaled step runner over its store) and the agent runs inside it with the session's
options; the session records how the run ended. The agent layer defines only this
protocol and never imports the runtime or the work layer (durability is injected).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..models import Message
from ._events import RunResult
from ._state import AgentView, RunOptions

__all__ = ["DurableRuntime", "RunSession"]


@dataclass
class RunSession:
    """One durable run, opened by a runtime for an agent to run in.

    Attributes:
        prompt: what the run is asked (on a resume: the recorded prompt).
        run_id: the run's id.
        user_id: the user it belongs to (None: anonymous).
        message_history: the conversation it continues (recorded with it), or None.
        options: the options to run with: the runtime's journaled step runner, the
            caller's clock, ids and event sink, and ``runtime`` set for the layers above.
        result: set by the agent once the run returned; the runtime records it when the
            session closes (None: it raised).
    """

    prompt: str
    run_id: str
    user_id: str | None
    message_history: list[Message] | None
    options: RunOptions
    result: RunResult[Any] | None = None


@runtime_checkable
class DurableRuntime(Protocol):
    """What ``Agent.run(..., runtime=)`` / ``Agent.resume`` need of a runtime
    (:class:`foreperson.runtime.Runtime` implements it)."""

    def open_run(
        self,
        agent: AgentView,
        *,
        prompt: str | None,
        run_id: str | None,
        user_id: str | None,
        message_history: Sequence[Message] | None,
        options: RunOptions | None,
    ) -> AbstractAsyncContextManager[RunSession]:
        """Open the run: record it (or find it, and check it belongs to ``user_id``),
        take ownership of it, and give the options to run it with; on exit, record how
        it ended and give it up.

        Args:
            agent: the agent (or team) to run.
            prompt: the prompt; None to resume the recorded run ``run_id``.
            run_id: the run's id (None: a new one; required to resume).
            user_id: the user asking (tenant pinning).
            message_history: a conversation to continue (new runs only).
            options: the caller's options (clock, ids, events; not ``steps`` or
                ``parent``).

        Returns:
            An async context manager giving the :class:`RunSession`.

        Raises:
            AccessDenied: the run belongs to another user.
            RunBusy: another live process owns the run.
            ConfigurationError: no such run to resume, or another agent's run.
        """
        ...
