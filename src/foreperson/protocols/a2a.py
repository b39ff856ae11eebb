"""An ``Agent`` (a ``Team`` is one) or a ``Machine`` published as an A2A agent with the
official ``a2a-sdk`` server (``pip install 'foreperson[a2a]'``): what ``foreperson a2a
serve`` runs.

* The agent card (``/.well-known/agent-card.json``) is made from the target's name, its
  instructions and its tools (one skill for the entry point, one per tool); it offers
  streaming. JSON-RPC is served at ``/``.
* Each message starts a task: the run's events are streamed as ``working`` status
  updates (one line each, as MCP progress says them), the answer is the task's artifact
  (its text, and a data part with a structured output or a machine's final context),
  the task ends ``completed``; a run parked on an approval ends ``input_required`` with
  the run id and the pending calls in its message; a failure ends ``failed`` with the
  error (redacted).
* A state machine's summons (a message with a ``foreperson.summons`` data part, as
  :func:`~foreperson.agents.a2a_agent` sends it) runs the agent with ``updateContext``
  and the machine's typed rules, here where the agent runs; the writes come back as a
  data part ``{"updateContext": [{"field": ..., "value": ...}, ...]}``.
* ``tasks/cancel`` cancels the run (and what it is waiting on); the task ends
  ``canceled``. A run longer than ``run_timeout_s`` is stopped and ends ``failed``.

The HTTP edge is the page's: the ``Host`` header checked whatever the bind address, a
bearer token when given, bounded connections and requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
from pydantic import BaseModel

from ..agents import A2A_SUMMONS_KEY, Agent, FinalEvent, RunResult
from ..errors import ConfigurationError, ForepersonError, MissingDependency, describe
from ..fsm import AgentSummoner, Machine, Summons
from ..journal import Journal
from ..runtime import Runtime
from ..work import TaskStore
from ._progress import progress_message

__all__ = ["RUN_TIMEOUT_S", "a2a_app", "agent_card", "serve_a2a"]

log = logging.getLogger("foreperson.protocols")

try:  # the SDK's executor interface, when the a2a extra is installed
    from a2a.server.agent_execution import AgentExecutor as _ExecutorBase
except ImportError:  # pragma: no cover - a2a_app says what to install
    _ExecutorBase = object  # type: ignore[misc,assignment]

RUN_TIMEOUT_S = 900.0
"""Seconds one message may run an agent or a machine before it is stopped (15 min)."""


def _sdk() -> None:
    try:
        import a2a.server  # noqa: F401
    except ImportError as exc:
        raise MissingDependency("serving over A2A needs the a2a extra: pip install "
                                "'foreperson[a2a]'") from exc


def agent_card(target: Agent[Any] | Machine, url: str) -> Any:
    """The A2A agent card of ``target`` served at ``url``.

    Args:
        target: an Agent (a Team is one) or a Machine.
        url: the base URL the agent answers at (``http://HOST:PORT/``).

    Returns:
        An ``a2a.types.AgentCard``: name, description (the instructions), version, text
        in and out, streaming, a JSON-RPC interface at ``url``, one skill for the entry
        point and one per tool.
    """
    _sdk()
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    from .. import __version__

    if isinstance(target, Machine):
        name = target.spec.name
        about = f"The state machine {name}: send a request, get its final context."
        skills = [AgentSkill(id=name, name=name, description=about, tags=["state machine"])]
    else:
        name = target.name
        about = " ".join(target.instructions.split()) or f"The agent {name}."
        skills = [AgentSkill(id=name, name=name, description=about, tags=["agent"])]
        skills += [AgentSkill(id=f"{name}.{tool.name}", name=tool.name,
                              description=tool.definition.description or tool.name,
                              tags=["tool"]) for tool in target.tools.values()]
    return AgentCard(
        name=name, description=about, version=__version__,
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        capabilities=AgentCapabilities(streaming=True),
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=url,
                                             protocol_version="1.0")],
        skills=skills)


def _parts(message: Any) -> tuple[str, list[Any]]:
    """(text, data objects) of an incoming message."""
    from google.protobuf.json_format import MessageToDict

    texts: list[str] = []
    data: list[Any] = []
    for part in message.parts if message is not None else ():
        which = part.WhichOneof("content")
        if which == "text":
            texts.append(part.text)
        elif which == "data":
            data.append(MessageToDict(part.data))
    return "\n".join(texts), data


def _data_part(value: Any) -> Any:
    from a2a.types import Part
    from google.protobuf.struct_pb2 import Value

    holder = Value()
    if isinstance(value, dict):
        holder.struct_value.update(value)
    else:
        holder.list_value.extend(value if isinstance(value, list) else [value])
    return Part(data=holder)


class _Executor(_ExecutorBase):
    """Runs one message's work for the SDK's request handler (an ``AgentExecutor``)."""

    def __init__(self, target: Agent[Any] | Machine, *, agents: Mapping[str, Any] | None,
                 store: TaskStore | None, user_id: str | None, run_timeout_s: float) -> None:
        self.target = target
        self.agents = agents
        self.store = store
        self.runtime = Runtime(store) if store is not None and isinstance(target, Agent) \
            else None
        self.user_id = user_id
        self.run_timeout_s = run_timeout_s

    async def execute(self, context: Any, event_queue: Any) -> None:
        """Start the task, run the target, stream its events, end the task."""
        from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
        from a2a.server.tasks import TaskUpdater

        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def said(text: str) -> Any:
            return updater.new_agent_message([new_text_part(text)])

        await updater.start_work()
        text, data = _parts(context.message)
        summons = next((d[A2A_SUMMONS_KEY] for d in data
                        if isinstance(d, dict) and A2A_SUMMONS_KEY in d), None)
        try:
            with anyio.fail_after(self.run_timeout_s):
                if isinstance(self.target, Machine):
                    await self._machine(text, updater)
                elif summons is not None:
                    await self._summons(self.target, summons, updater)
                else:
                    await self._agent(self.target, text, updater, said)
        except TimeoutError:
            await updater.failed(said(f"stopped after {self.run_timeout_s:g} s"))
        except (ForepersonError, ValueError, KeyError, TypeError) as exc:
            await updater.failed(said(describe(exc)))

    async def cancel(self, context: Any, event_queue: Any) -> None:
        """The SDK has cancelled the run's task already: say the task is canceled."""
        from a2a.server.tasks import TaskUpdater

        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    async def _agent(self, agent: Agent[Any], text: str, updater: Any,
                     said: Callable[[str], Any]) -> None:
        from a2a.helpers.proto_helpers import new_text_part
        from a2a.types import TaskState

        result: RunResult[Any] | None = None
        async for event in agent.stream(text, runtime=self.runtime, user_id=self.user_id):
            if isinstance(event, FinalEvent) and event.level == 0:
                result = event.result
                continue
            line = progress_message(event)
            if line is not None:
                await updater.update_status(TaskState.TASK_STATE_WORKING, said(line))
        assert result is not None
        if result.stop_reason == "awaiting_approval":
            waiting = "; ".join(f"call {p.call_id} {p.tool} by {p.agent}"
                                for p in result.pending)
            await updater.requires_input(said(
                f"run {result.run_id} waits for approval: {waiting} (decide with foreperson "
                "runs approve, then send again)"))
            return
        parts = [new_text_part(result.text or "")]
        output = result.output
        if isinstance(output, BaseModel):
            parts.append(_data_part(output.model_dump(mode="json")))
        await updater.add_artifact(parts, name="answer",
                                   metadata={"run_id": result.run_id,
                                             "stop_reason": result.stop_reason})
        await updater.complete()

    async def _summons(self, agent: Agent[Any], summons: Any, updater: Any) -> None:
        from a2a.helpers.proto_helpers import new_text_part

        asked = Summons.from_json({**summons, "agent": agent.name})
        summoner = AgentSummoner({agent.name: agent})
        try:
            done = await summoner.summon(asked)
        finally:
            await summoner.aclose()
        writes = [{"field": name, "value": value} for name, value in done.writes]
        await updater.add_artifact([new_text_part(done.text or ""),
                                    _data_part({"updateContext": writes})], name="writes")
        await updater.complete()

    async def _machine(self, text: str, updater: Any) -> None:
        from a2a.helpers.proto_helpers import new_text_part

        assert isinstance(self.target, Machine) and self.agents is not None
        journal = self.store if isinstance(self.store, Journal) else None
        result = await self.target.run(text, agents=self.agents, store=journal)
        await updater.add_artifact(
            [new_text_part(f"{result.machine} ended in {result.state} ({result.stop_reason})"),
             _data_part(result.context)], name="context",
            metadata={"run_id": result.run_id, "stop_reason": result.stop_reason})
        await updater.complete()


def a2a_app(target: Agent[Any] | Machine, *, url: str, store: TaskStore | None = None,
            agents: Mapping[str, Any] | None = None, user_id: str | None = None,
            run_timeout_s: float = RUN_TIMEOUT_S) -> Any:
    """The Starlette application that serves ``target`` as an A2A agent.

    Args:
        target: an Agent (a Team is one) or a Machine.
        url: the base URL it is reached at (for its card).
        store: a task store: agent runs are durable in it, machine runs journaled.
        agents: a machine's agents (``{name: Agent}``); needed for a machine.
        user_id: the user every run is recorded for (None: anonymous runs).
        run_timeout_s: seconds one message may run (> 0).

    Returns:
        The ASGI application (the card at ``/.well-known/agent-card.json``, JSON-RPC at
        ``/``).

    Raises:
        MissingDependency: the a2a extra is missing.
        ConfigurationError: a machine without agents, agents for an agent, a timeout
            that is not positive, or a target that is neither.
    """
    _sdk()
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from starlette.applications import Starlette

    if run_timeout_s <= 0:
        raise ConfigurationError(f"run_timeout_s must be > 0 seconds, not {run_timeout_s}")
    if isinstance(target, Machine):
        if agents is None:
            raise ConfigurationError(f"serving the machine {target.spec.name!r} needs its "
                                     "agents ({name: Agent})")
    elif isinstance(target, Agent):
        if agents is not None:
            raise ConfigurationError("agents= is for a machine; an agent or a team brings "
                                     "its own workers")
    else:
        raise ConfigurationError(f"cannot serve a {type(target).__name__} over A2A: give an "
                                 "Agent, a Team or a Machine")
    executor = _Executor(target, agents=agents, store=store, user_id=user_id,
                         run_timeout_s=run_timeout_s)
    card = agent_card(target, url)
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(),
                                    agent_card=card)
    return Starlette(routes=[*create_agent_card_routes(card),
                             *create_jsonrpc_routes(handler, "/")])


class _Later:
    """An ASGI application set after the socket is bound (the card needs the port)."""

    app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def serve_a2a(target: Agent[Any] | Machine, *, host: str = "127.0.0.1", port: int = 8730,
              token: str | None = None, allowed_hosts: Sequence[str] = (),
              public_url: str | None = None,
              ready: Callable[[str, int, str], None] | None = None, **options: Any) -> None:
    """Serve ``target`` as an A2A agent over HTTP until Ctrl-C.

    Args:
        target: an Agent (a Team is one) or a Machine.
        host: the address to bind (default loopback only).
        port: the TCP port (0: any free one).
        token: a bearer token every request must carry, or None.
        allowed_hosts: ``Host`` names accepted besides the defaults.
        public_url: the URL the card gives (default ``http://HOST:PORT/``; behind a
            proxy, its URL).
        ready: called with the bound host, port and the card's URL once it listens.
        **options: ``store``, ``agents``, ``user_id``, ``run_timeout_s`` (see
            :func:`a2a_app`).

    Raises:
        OSError: the address cannot be bound.
        MissingDependency, ConfigurationError: as :func:`a2a_app`.
    """
    from ..observe import Access, AsgiServer, Guard, default_allowed_hosts

    names = default_allowed_hosts(host) | {h.lower() for h in allowed_hosts}
    later = _Later()
    http = AsgiServer(Guard(later, Access(frozenset(names), token=token),
                            realm="foreperson a2a"), host=host, port=port)
    shown = "127.0.0.1" if http.host in ("0.0.0.0", "::") else http.host
    url = public_url or f"http://{shown}:{http.port}/"
    try:
        later.app = a2a_app(target, url=url, **options)
    except BaseException:
        http.server_close()
        raise
    if ready is not None:
        ready(http.host, http.port, url)
    http.serve_forever()
