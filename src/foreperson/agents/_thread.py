"""A conversation continued across runs (:class:`Thread`)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from ..models import Message
from ._events import RunResult

__all__ = ["Thread", "continued"]


@dataclass
class Thread:
    """A conversation an agent (or a team) continues across runs:
    ``agent.run(prompt, thread=thread)`` starts from its messages and leaves the run's
    messages in it.

    Seed 004: every follow-up on a thread starts at the supervisor again (3 more model
    calls per follow-up for a flat supervisor on the outage request, 5 in the two-team
    hierarchy).

    Attributes:
        id: the thread's id (default a random 32-hex id).
        messages: the conversation so far, system message first; empty before the
            first run.
        runs: the ids of the runs made on it, in order.
    """

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    messages: list[Message] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)

    def record(self, result: RunResult[Any]) -> None:
        """Keep a finished run's conversation as the thread's.

        Args:
            result: the run's result.
        """
        self.messages = list(result.messages)
        self.runs.append(result.run_id)


def continued(thread: Thread | None, message_history: Sequence[Message] | None
              ) -> Sequence[Message] | None:
    """The messages a run starts from: the thread's, else ``message_history``.

    Raises:
        ConfigurationError: both were given, or ``thread`` is not a :class:`Thread`.
    """
    if thread is None:
        return message_history
    if message_history is not None:
        raise ConfigurationError("give a run thread= or message_history=, not both")
    if not isinstance(thread, Thread):
        raise ConfigurationError(f"thread= takes a Thread, got {type(thread).__name__}")
    return thread.messages or None
