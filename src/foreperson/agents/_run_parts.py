"""The small values a run keeps and hands out, apart from the run's state itself: the
record of a spawned worker (:class:`SpawnRecord`), the running digest of a conversation
(:class:`ConversationDigest`), the event sink's type (:data:`EventSink`) and the
deadline scope (:class:`DeadlineScope`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..journal import request_digest
from ..models import MESSAGES_ADAPTER, Message, SystemMessage, ToolDefinition

__all__ = ["AGENT_OUTPUT", "NO_DEADLINE", "ConversationDigest", "DeadlineScope", "EventSink",
           "SpawnRecord"]

EventSink = Callable[[Any], Awaitable[None]]
"""``async (event) -> None``: receives a run's events as they happen (``RunOptions.events``).
The outermost ``Agent.stream`` gives one to its run and to every run nested in it, so
their events reach its consumer while they run; awaiting it is the backpressure."""


@dataclass(frozen=True)
class SpawnRecord:
    """A worker spawned during a run (seed 001's ``spawn_worker``), as journaled: on
    replay the same record comes back, so the worker is rebuilt under the same role and
    id.

    Attributes:
        role: the worker's role (its name in the roster).
        instructions: its system prompt.
        worker_id: its id, drawn from the run's id source (``RunOptions.ids``).
        data: anything else the spawning layer wants back on replay (JSON values).
    """

    role: str
    instructions: str
    worker_id: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConversationDigest:
    """A running digest of a conversation that only grows: each message is serialised
    once, so digesting every model call of a run costs time linear in the run, not
    quadratic. Starts over when the list was changed other than by appending."""

    length: int = 0
    last: Message | None = None
    digest: str = ""
    latest: str = ""
    tools: tuple[ToolDefinition, ...] | None = None
    tools_digest: str = ""
    system: Message | None = None
    system_digest: str | None = None

    def of(self, messages: Sequence[Message]) -> str:
        """The digest of ``messages`` (the same for the same conversation, on every
        replay); :attr:`latest` is then the digest of the messages added since the
        previous call (all of them at the first)."""
        if self.length > len(messages) or (
            self.length and messages[self.length - 1] is not self.last
        ):
            self.length, self.last, self.digest = 0, None, ""
        if self.length < len(messages):
            new = MESSAGES_ADAPTER.dump_python(list(messages[self.length:]), mode="json")
            self.latest = request_digest(new)
            self.digest = request_digest([self.digest, self.latest])
            self.length, self.last = len(messages), messages[-1]
        return self.digest

    def of_system(self, messages: Sequence[Message]) -> str | None:
        """The digest of the conversation's system message (its instructions), or None
        when it has none (kept while it is the same object)."""
        first = messages[0] if messages else None
        if not isinstance(first, SystemMessage):
            return None
        if first is not self.system:
            self.system, self.system_digest = first, request_digest(first.content)
        return self.system_digest

    def of_tools(self, tools: Sequence[ToolDefinition]) -> str:
        """The digest of the tool definitions offered, each with its
        ``replay_description`` in place of its description when it has one (kept while
        they are the same objects: a tool's definition is built once)."""
        seen = self.tools
        if seen is None or len(seen) != len(tools) or any(
            a is not b for a, b in zip(seen, tools, strict=True)
        ):
            self.tools_digest = request_digest([
                {"name": d.name, "parameters": d.parameters,
                 "description": d.description if d.replay_description is None
                 else d.replay_description} for d in tools])
            self.tools = tuple(tools)
        return self.tools_digest


AGENT_OUTPUT: Any = object()   # call_model's default output type: the agent's


class DeadlineScope(Protocol):
    """What :meth:`RunContext.deadline_scope` returns: a context manager that says
    whether it cut the wait short."""

    @property
    def cancelled_caught(self) -> bool:
        """True when the deadline cancelled the wait inside the scope."""
        ...

    def __enter__(self) -> Any: ...

    def __exit__(self, *exc_info: Any) -> bool | None: ...


class _NoDeadline:
    cancelled_caught = False

    def __enter__(self) -> _NoDeadline:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        return None


NO_DEADLINE = _NoDeadline()
"""A scope without a deadline."""


