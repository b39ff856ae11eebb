"""Remote A2A agents (the Agent2Agent protocol, through the official ``a2a-sdk`` client)
as foreperson agents: :func:`a2a_agent` returns an :class:`~foreperson.agents.Agent`
whose architecture sends the run's request to the remote agent instead of calling a
model, so it stands wherever an agent stands: a team's worker (delegated to, journaled,
recorded as a task, retried under the team's rules), a state machine's agent, a run of
its own.

* The remote call is a journaled step (``.../a2a:message``): a resumed or replayed run
  returns the recorded answer without sending the message again.
* Streaming updates (the remote task's status messages and artifacts, as they arrive)
  are published as :class:`A2AUpdateEvent` to the run's event sink, so a team's stream
  shows them as the worker's events.
* A state machine's summons goes as an A2A message whose text is the summons' prompt and
  whose data part carries the summons (``{"foreperson.summons": {...}}``); the answer's
  writes (a data part ``{"updateContext": [{"field": ..., "value": ...}, ...]}``, or an
  object of field -> value) are checked with the same typed ``updateContext`` rules as a
  local agent's (see :class:`~foreperson.fsm.AgentSummoner`).
* Every call is bounded (``timeout_s``); a remote task that fails, is rejected or
  cancelled, or a server that cannot be reached, ends the run with an error
  (:class:`~foreperson.errors.RunError`) that a team counts as the delegation's failure.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from ..errors import ConfigurationError, MissingDependency, RunError, describe
from ..models import (
    Message,
    ModelBase,
    ModelRequestParameters,
    ModelResponse,
    Usage,
    UserMessage,
)
from ._events import AgentEvent
from ._state import RunContext

__all__ = ["A2A_SUMMONS_KEY", "A2A_TIMEOUT_S", "A2A_WRITES_KEY", "A2AReply", "A2AUpdateEvent",
           "RemoteA2A", "a2a_agent"]

A2A_SUMMONS_KEY = "foreperson.summons"
"""The key of the data part that carries a state machine's summons (``Summons.to_json()``)."""
A2A_WRITES_KEY = "updateContext"
"""The key of the answer's data part that lists a summons' writes."""
A2A_TIMEOUT_S = 120.0
"""Seconds one message to a remote agent may take, streaming included."""


@dataclass(frozen=True)
class A2AUpdateEvent:
    """A remote A2A agent's streamed update: its task's state changed or an artifact
    arrived.

    Attributes:
        run_id: the run.
        agent: the agent's name (the remote agent's, as the roster knows it).
        state: the remote task's state (``working``, ``completed``, ...), or
            ``artifact`` for an artifact update.
        text: the update's text ('' when it had none).
        task_id: the remote task's id.
        parent_run_id, parent_path, level: where the run is nested (see
            :class:`~foreperson.agents.ModelCallEvent`).
    """

    run_id: str
    agent: str
    state: str
    text: str
    task_id: str | None = None
    parent_run_id: str | None = None
    parent_path: str | None = None
    level: int = 0
    kind: Literal["a2a_update"] = "a2a_update"


@dataclass(frozen=True)
class A2AReply:
    """What a remote agent answered.

    Attributes:
        text: the answer's text: its artifacts' text, else its final message's.
        data: the JSON objects of its data parts, in order.
        state: the remote task's last state (``completed``, ``input_required``, ...), or
            ``message`` when it answered with a message and no task.
        task_id: the remote task's id, or None.
        updates: how many streamed updates came before the answer.
    """

    text: str
    data: tuple[Any, ...] = ()
    state: str = "completed"
    task_id: str | None = None
    updates: int = 0

    def to_json(self) -> dict[str, Any]:
        """The reply as JSON (the journal's record of the step)."""
        return {"text": self.text, "data": list(self.data), "state": self.state,
                "task_id": self.task_id, "updates": self.updates}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> A2AReply:
        """Read a reply written by :meth:`to_json`."""
        return cls(str(data.get("text") or ""), tuple(data.get("data") or ()),
                   str(data.get("state") or "completed"), data.get("task_id"),
                   int(data.get("updates") or 0))

    def writes(self) -> list[tuple[str, Any]]:
        """The context writes of a summons' answer: each ``{"field", "value"}`` (or
        ``[field, value]``) of a data part's ``updateContext`` list, else each item of
        a data part that is an object of field -> value."""
        found: list[tuple[str, Any]] = []
        for part in self.data:
            if not isinstance(part, dict):
                continue
            listed = part.get(A2A_WRITES_KEY)
            if isinstance(listed, list):
                for item in listed:
                    if isinstance(item, dict) and "field" in item:
                        found.append((str(item["field"]), item.get("value")))
                    elif isinstance(item, (list, tuple)) and len(item) == 2:
                        found.append((str(item[0]), item[1]))
            elif A2A_SUMMONS_KEY not in part:
                found.extend((str(k), v) for k, v in part.items())
        return found


_DONE = {"TASK_STATE_COMPLETED": "completed", "TASK_STATE_FAILED": "failed",
         "TASK_STATE_CANCELED": "canceled", "TASK_STATE_REJECTED": "rejected",
         "TASK_STATE_INPUT_REQUIRED": "input_required",
         "TASK_STATE_AUTH_REQUIRED": "auth_required", "TASK_STATE_WORKING": "working",
         "TASK_STATE_SUBMITTED": "submitted"}


def _state_name(value: Any) -> str:
    from a2a.types import TaskState

    name = TaskState.Name(value) if isinstance(value, int) else str(value)
    return _DONE.get(name, name.removeprefix("TASK_STATE_").lower())


def _parts(parts: Sequence[Any]) -> tuple[list[str], list[Any]]:
    """(texts, data objects) of A2A parts."""
    from google.protobuf.json_format import MessageToDict

    texts: list[str] = []
    data: list[Any] = []
    for part in parts:
        which = part.WhichOneof("content")
        if which == "text":
            texts.append(part.text)
        elif which == "data":
            data.append(MessageToDict(part.data))
    return texts, data


class RemoteA2A:
    """The architecture of an agent that is a remote A2A agent: each run sends one
    message (its request) and ends with the answer.

    Args:
        url: the agent's base URL (its card is at ``URL/.well-known/agent-card.json``).
        headers: HTTP headers for every request (e.g. ``{"Authorization": "Bearer
            ..."}``).
        timeout_s: seconds one message may take, streamed updates included (> 0).
        streaming: ask for streamed updates (when the agent's card offers them).
    """

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None,
                 timeout_s: float = A2A_TIMEOUT_S, streaming: bool = True) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"a2a_agent: {url!r} is not an http:// or https:// URL")
        if timeout_s <= 0:
            raise ConfigurationError(f"a2a_agent: timeout_s must be > 0 seconds, not "
                                     f"{timeout_s}")
        self.url = url.rstrip("/")
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.streaming = streaming
        self._card: Any = None

    def __repr__(self) -> str:
        return f"RemoteA2A({self.url!r})"

    async def card(self) -> Any:
        """The agent's card (fetched once, then kept).

        Raises:
            RunError: it cannot be fetched or read.
        """
        if self._card is None:
            import httpx
            from a2a.client import A2ACardResolver

            try:
                with anyio.fail_after(self.timeout_s):
                    async with httpx.AsyncClient(headers=self.headers,
                                                 timeout=self.timeout_s) as http:
                        self._card = await A2ACardResolver(http, self.url).get_agent_card()
            except Exception as exc:  # noqa: BLE001 - said with the URL
                raise RunError(f"A2A agent {self.url}: cannot read its agent card: "
                               f"{describe(exc)}") from exc
        return self._card

    async def send(self, text: str, *, data: Mapping[str, Any] | None = None,
                   ctx: RunContext | None = None) -> A2AReply:
        """Send one message and wait for the answer (bounded by ``timeout_s``).

        Args:
            text: the message's text part.
            data: a JSON object sent as a data part too, or None.
            ctx: the run whose event sink gets the streamed updates, or None.

        Returns:
            The answer.

        Raises:
            RunError: the agent cannot be reached, answered with an error, or took
                longer than ``timeout_s``.
        """
        import httpx
        from a2a.client import ClientConfig, create_client
        from a2a.types import Message as A2AMessage
        from a2a.types import Part, Role, SendMessageRequest
        from google.protobuf.struct_pb2 import Value

        card = await self.card()
        parts = [Part(text=text)]
        if data is not None:
            value = Value()
            value.struct_value.update(dict(data))
            parts.append(Part(data=value))
        request = SendMessageRequest(message=A2AMessage(
            message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=parts))
        reply = _Collect()
        try:
            with anyio.fail_after(self.timeout_s):
                async with httpx.AsyncClient(headers=self.headers,
                                             timeout=self.timeout_s) as http:
                    client = await create_client(card, client_config=ClientConfig(
                        httpx_client=http, streaming=self.streaming))
                    try:
                        async for event in client.send_message(request):
                            update = reply.add(event)
                            if update is not None and ctx is not None:
                                state, said = update
                                await ctx.publish(A2AUpdateEvent(
                                    ctx.run_id, ctx.agent_name, state, said, reply.task_id,
                                    **ctx.tags))
                    finally:
                        await client.close()
        except TimeoutError as exc:
            raise RunError(f"A2A agent {self.url} did not answer within "
                           f"{self.timeout_s:g} s") from exc
        except RunError:
            raise
        except Exception as exc:  # noqa: BLE001 - a transport or protocol failure
            raise RunError(f"A2A agent {self.url}: the message failed: {describe(exc)}"
                           ) from exc
        return reply.reply()

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Send the run's request (its last user message) as a journaled step and end
        the run with the answer's text.

        Raises:
            RunError: as :meth:`send`, or the remote task ended failed, rejected,
                cancelled or waiting for input.
        """
        prompt = next((m.content for m in reversed(ctx.messages)
                       if isinstance(m, UserMessage)), "")

        async def execute() -> dict[str, Any]:
            return (await self.send(prompt, ctx=ctx)).to_json()

        outcome = await ctx.step("a2a", execute, name="message",
                                 request={"url": self.url, "text": prompt})
        reply = A2AReply.from_json(outcome.value)
        if reply.state not in ("completed", "message"):
            raise RunError(f"A2A agent {self.url}: its task ended {reply.state}"
                           + (f": {reply.text}" if reply.text else ""))
        # the answer as the conversation's last reply (its text is the run's text); no
        # model call was made here, so it counts none
        ctx.messages.append(ModelResponse(text=reply.text, usage=Usage(),
                                          model_name=f"a2a:{self.url}"))
        ctx.end("completed", output=reply.text)
        return
        yield  # an async generator, like every architecture


@dataclass
class _Collect:
    """Folds an A2A stream (or a single answer) into an :class:`A2AReply`."""

    texts: list[str] = field(default_factory=list)
    data: list[Any] = field(default_factory=list)
    said: str = ""
    state: str = "submitted"
    task_id: str | None = None
    updates: int = 0

    def add(self, event: Any) -> tuple[str, str] | None:
        """Take one ``StreamResponse``; returns (state, text) of an update worth
        publishing, or None."""
        which = event.WhichOneof("payload")
        if which == "message":
            texts, data = _parts(event.message.parts)
            self.said = "\n".join(texts)
            self.data.extend(data)
            self.state = "message"
            return None
        if which == "task":
            task = event.task
            self.task_id = task.id
            self.state = _state_name(task.status.state)
            for artifact in task.artifacts:
                texts, data = _parts(artifact.parts)
                self.texts.extend(texts)
                self.data.extend(data)
            if task.status.HasField("message"):
                self.said = "\n".join(_parts(task.status.message.parts)[0])
            return None
        self.updates += 1
        if which == "status_update":
            status = event.status_update.status
            self.state = _state_name(status.state)
            said = "\n".join(_parts(status.message.parts)[0]) if status.HasField("message") \
                else ""
            if said:
                self.said = said
            return self.state, said
        if which == "artifact_update":
            texts, data = _parts(event.artifact_update.artifact.parts)
            self.texts.extend(texts)
            self.data.extend(data)
            return "artifact", "\n".join(texts)
        return None

    def reply(self) -> A2AReply:
        text = "\n".join(t for t in self.texts if t) or self.said
        return A2AReply(text, tuple(self.data), self.state, self.task_id, self.updates)


class _Remote(ModelBase):
    """The model of a remote agent: it has none here; calling it is a bug, said so."""

    def __init__(self, url: str) -> None:
        self.url = url

    @property
    def name(self) -> str:
        """``a2a:<url>``."""
        return f"a2a:{self.url}"

    async def request(self, messages: Sequence[Message], params: ModelRequestParameters
                      ) -> ModelResponse:
        """Never answers.

        Raises:
            ConfigurationError: always (the remote agent has its own model).
        """
        raise ConfigurationError(f"the A2A agent at {self.url} runs its own model; its "
                                 "architecture sends messages instead")


def a2a_agent(url: str, *, name: str | None = None, description: str | None = None,
              headers: Mapping[str, str] | None = None, timeout_s: float = A2A_TIMEOUT_S,
              streaming: bool = True) -> Any:
    """A remote A2A agent as an :class:`~foreperson.agents.Agent` (``pip install
    'foreperson[a2a]'``).

    Args:
        url: the agent's base URL (its card is read from
            ``URL/.well-known/agent-card.json`` at the first run).
        name: the agent's name in a roster or a machine (default ``"a2a"``; give one).
        description: what it does, for a supervisor or router model to read (default:
            "A remote A2A agent at URL").
        headers: HTTP headers for every request (authentication).
        timeout_s: seconds one message may take (default :data:`A2A_TIMEOUT_S`).
        streaming: ask for streamed updates.

    Returns:
        The agent. Its runs make no model call here; each sends one message.

    Raises:
        MissingDependency: the a2a extra is not installed.
        ConfigurationError: ``url`` is not http(s), or ``timeout_s`` is not positive.
    """
    from ._agent import Agent

    try:
        import a2a.client  # noqa: F401
    except ImportError as exc:
        raise MissingDependency("A2A agents need the a2a extra: pip install "
                                "'foreperson[a2a]'") from exc
    remote = RemoteA2A(url, headers=headers, timeout_s=timeout_s, streaming=streaming)
    return Agent(description or f"A remote A2A agent at {remote.url}.",
                 model=_Remote(remote.url), name=name or "a2a", architecture=remote)
