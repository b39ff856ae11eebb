"""An ``Agent`` (a ``Team`` is one) or a ``Machine`` served as a Model Context Protocol
server, with the official SDK (``pip install 'foreperson[mcp]'``): what ``foreperson mcp
serve`` runs.

Each entry point is one MCP tool with a JSON schema for its input:

* an agent named ``triage``: ``triage(prompt, run_id=None)`` runs it; with a store, also
  ``triage_resume(run_id)`` continues a parked or interrupted run from its journal;
* a machine: ``NAME(request, context=None, run_id=None)``; with a store,
  ``NAME_resume(run_id)``;
* the work layer, only when kinds are named (:class:`WorkTools`): ``submit_task(kind,
  payload, task_id=None)`` and ``task_status(task_id)``.

A run's events are sent as MCP progress notifications while it runs (``agent: calls
lookup``, ``team -> billing: ...``); a cancelled call (``notifications/cancelled``)
cancels the run; every answer carries the run id (structured content, schema
:class:`RunAnswer`), so a client can resume it. A run parked on an approval answers
at once with ``stop_reason == "awaiting_approval"`` and its pending calls; once they
are decided (``foreperson runs approve``, from any process), the ``_resume`` tool
finishes it. A run that goes on longer than ``run_timeout_s`` is stopped and answered
with an error naming its run id.

Example::

    from foreperson.protocols.mcp import mcp_server, serve_stdio

    server = mcp_server(team, store=SqliteStore("runs.db"))
    anyio.run(serve_stdio, server)
"""

# No ``from __future__ import annotations``: the SDK reads the tools' signatures, whose
# types (the SDK's Context and CallToolResult) are imported only when a server is made.
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from pydantic import BaseModel, Field

from ..agents import Agent, FinalEvent, RunResult
from ..errors import ConfigurationError, ForepersonError, MissingDependency, describe
from ..fsm import Machine, MachineResult
from ..journal import Journal
from ..runtime import Runtime
from ..work import Task, TaskStore
from ._progress import progress_message

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import CallToolResult

__all__ = ["RUN_TIMEOUT_S", "PendingCall", "RunAnswer", "TaskAnswer", "WorkTools",
           "mcp_server", "serve_http", "serve_stdio"]

log = logging.getLogger("foreperson.protocols")

RUN_TIMEOUT_S = 900.0
"""Seconds one tool call may run an agent or a machine before it is stopped (15 min)."""

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


class PendingCall(BaseModel):
    """A tool call a parked run waits on: decide it with ``foreperson runs approve RUN
    CALL`` (or ``runtime.approve``), then call the ``_resume`` tool."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    agent: str


class RunAnswer(BaseModel):
    """What an entry-point tool answers (its structured content; the text content is
    ``text``).

    Attributes:
        run_id: the run: give it to the ``_resume`` tool (with a store) or to
            ``foreperson runs show``.
        stop_reason: why it ended (``completed``, ``awaiting_approval``, a cap, ...).
        text: the answer's text (an agent), or the final state (a machine).
        output: the structured output (an agent's ``output_type`` object as JSON; a
            machine's final context), or None.
        detail: a note on the stop, or None.
        pending: the calls a parked run waits on.
        model_calls: model calls the run made (a resumed run: its new ones).
        tool_calls: tool calls it handled.
    """

    run_id: str
    stop_reason: str
    text: str
    output: Any = None
    detail: str | None = None
    pending: list[PendingCall] = Field(default_factory=list)
    model_calls: int = 0
    tool_calls: int = 0


class TaskAnswer(BaseModel):
    """A work-layer task, as ``submit_task`` and ``task_status`` answer it.

    Attributes:
        task_id: the task.
        kind: its kind.
        status: ``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED`` or ``DEAD``.
        attempts: attempts started.
        result: the worker's JSON result once COMPLETED, else None.
        error: the last attempt's error (redacted), else None.
    """

    task_id: str
    kind: str
    status: str
    attempts: int = 0
    result: Any = None
    error: str | None = None


@dataclass(frozen=True)
class WorkTools:
    """The work layer offered as MCP tools: ``submit_task`` for the named kinds only, and
    ``task_status`` for tasks of those kinds.

    Args:
        store: where tasks go (the store ``foreperson worker`` processes drain).
        kinds: the task kinds a client may submit (at least one).

    Raises:
        ConfigurationError: no kind named.
    """

    store: TaskStore
    kinds: frozenset[str]

    def __post_init__(self) -> None:
        if not self.kinds:
            raise ConfigurationError("WorkTools: name at least one task kind a client may "
                                     "submit")


def _tool_name(name: str) -> str:
    """An MCP tool name from an agent's or machine's name (letters, digits, _ and -)."""
    return _NAME.sub("_", name).strip("_") or "run"


def _agent_answer(result: RunResult[Any]) -> RunAnswer:
    output = result.output
    if isinstance(output, BaseModel):
        output = output.model_dump(mode="json")
    elif output is not None and not isinstance(output, (str, int, float, bool, list, dict)):
        output = str(output)
    return RunAnswer(
        run_id=result.run_id, stop_reason=result.stop_reason, text=result.text or "",
        output=None if output == result.text else output, detail=result.detail,
        pending=[PendingCall(call_id=p.call_id, tool=p.tool, arguments=p.arguments,
                             agent=p.agent) for p in result.pending],
        model_calls=result.usage.model_calls, tool_calls=result.usage.tool_calls)


def _machine_answer(result: MachineResult) -> RunAnswer:
    return RunAnswer(run_id=result.run_id, stop_reason=result.stop_reason,
                     text=f"{result.machine} ended in {result.state}", output=result.context,
                     detail=result.detail, model_calls=result.usage.model_calls,
                     tool_calls=result.usage.tool_calls)


def _result(answer: RunAnswer, *, error: bool = False) -> "CallToolResult":
    from mcp_types import CallToolResult, TextContent

    text = answer.text
    if answer.pending:
        text += "".join(f"\nwaiting for approval: call {p.call_id} {p.tool} by {p.agent}"
                        for p in answer.pending)
    text += f"\n(run {answer.run_id}: {answer.stop_reason})"
    return CallToolResult(content=[TextContent(type="text", text=text.strip())],
                          structured_content=answer.model_dump(mode="json"), is_error=error)


def _failure(message: str) -> "CallToolResult":
    from mcp_types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


async def _relay(ctx: Any, counter: list[int], event: Any) -> None:
    """Send one event as a progress notification (a no-op for a client that gave no
    progress token); a client gone away does not stop the run."""
    message = progress_message(event)
    if message is None:
        return
    counter[0] += 1
    try:
        await ctx.report_progress(counter[0], None, message)
    except Exception:  # noqa: BLE001 - progress is best effort
        log.debug("progress notification not sent", exc_info=True)


async def _run_agent(agent: Agent[Any], ctx: Any, *, prompt: str | None, run_id: str | None,
                     runtime: Runtime | None, user_id: str | None, run_timeout_s: float,
                     name: str) -> "CallToolResult":
    """One call of an agent's entry tool (``prompt``) or its resume tool (None): the run,
    its events relayed as progress, bounded by ``run_timeout_s``."""
    counter = [0]
    final: RunResult[Any] | None = None
    seen_run = run_id
    with anyio.move_on_after(run_timeout_s) as scope:
        if prompt is None:              # resume: the journal holds the prompt
            assert runtime is not None and run_id is not None
            final = await agent.resume(run_id, runtime=runtime, user_id=user_id)
        else:
            async for event in agent.stream(prompt, run_id=run_id, runtime=runtime,
                                            user_id=user_id):
                seen_run = seen_run or getattr(event, "run_id", None)
                if isinstance(event, FinalEvent) and event.level == 0:
                    final = event.result
                else:
                    await _relay(ctx, counter, event)
    if scope.cancelled_caught or final is None:
        again = (f"; resume it with {name}_resume(run_id={seen_run!r})"
                 if runtime is not None and seen_run else "")
        return _failure(f"the run {seen_run or ''} was stopped after {run_timeout_s:g} s"
                        f"{again}")
    return _result(_agent_answer(final))


def _agent_tools(server: Any, agent: Agent[Any], name: str, runtime: Runtime | None,
                 user_id: str | None, run_timeout_s: float) -> None:
    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult

    async def stream_run(ctx: Context, *, prompt: str | None, run_id: str | None
                         ) -> CallToolResult:
        return await _run_agent(agent, ctx, prompt=prompt, run_id=run_id, runtime=runtime,
                                user_id=user_id, run_timeout_s=run_timeout_s, name=name)

    async def run(
        prompt: Annotated[str, Field(description="The request, as a user would write it.")],
        ctx: Context,
        run_id: Annotated[str | None, Field(
            description="The run's id (default a new one). With a store, the same id "
                        "again replays the recorded steps.")] = None,
    ) -> Annotated[CallToolResult, RunAnswer]:
        try:
            return await stream_run(ctx, prompt=prompt, run_id=run_id)
        except ForepersonError as exc:
            return _failure(describe(exc))

    about = " ".join(str(agent.instructions or "").split())
    server.add_tool(run, name=name, description=f"Run {agent.name}. {about}"[:1000].strip())
    if runtime is None:
        return

    async def resume(
        run_id: Annotated[str, Field(description="The run to continue (from an earlier "
                                                 "answer's run_id).")],
        ctx: Context,
    ) -> Annotated[CallToolResult, RunAnswer]:
        try:
            return await stream_run(ctx, prompt=None, run_id=run_id)
        except ForepersonError as exc:
            return _failure(describe(exc))

    server.add_tool(resume, name=f"{name}_resume",
                    description=f"Continue a run of {agent.name} from its journal (after "
                                "its pending approvals are decided, or an interruption): "
                                "finished steps are not done again.")


def _machine_tools(server: Any, machine: Machine, name: str, agents: Mapping[str, Any],
                   store: Journal | None, run_timeout_s: float) -> None:
    from mcp_types import CallToolResult

    async def bounded(call: Callable[[], Any], run_id: str | None) -> CallToolResult:
        with anyio.move_on_after(run_timeout_s):
            try:
                return _result(_machine_answer(await call()))
            except ForepersonError as exc:
                return _failure(describe(exc))
        return _failure(f"the run {run_id or ''} was stopped after {run_timeout_s:g} s")

    async def run(
        request: Annotated[str, Field(description="The request the run serves.")],
        context: Annotated[dict[str, Any] | None, Field(
            description="Initial values of context fields.")] = None,
        run_id: Annotated[str | None, Field(description="The run's id (default a new "
                                                        "one).")] = None,
    ) -> Annotated[CallToolResult, RunAnswer]:
        return await bounded(lambda: machine.run(request, agents=agents, store=store,
                                                 run_id=run_id, context=context), run_id)

    server.add_tool(run, name=name, description=f"Run the state machine {machine.spec.name} "
                                                "on a request.")
    if store is None:
        return

    async def resume(
        run_id: Annotated[str, Field(description="The run to continue.")],
    ) -> Annotated[CallToolResult, RunAnswer]:
        return await bounded(lambda: machine.resume(run_id, agents=agents, store=store),
                             run_id)

    server.add_tool(resume, name=f"{name}_resume",
                    description=f"Continue a run of {machine.spec.name} from its last "
                                "checkpoint.")


def _task_answer(task: Task) -> TaskAnswer:
    return TaskAnswer(task_id=task.id, kind=task.kind, status=task.status.name,
                      attempts=task.attempts, result=task.result, error=task.error)


def _work_tools(server: Any, work: WorkTools) -> None:
    kinds = sorted(work.kinds)

    async def submit_task(
        kind: Annotated[str, Field(description=f"One of: {', '.join(kinds)}.")],
        payload: Annotated[dict[str, Any], Field(description="The task's arguments (a "
                                                             "JSON object).")],
        task_id: Annotated[str | None, Field(description="An id of your own: submitting "
                                                         "it again adds nothing.")] = None,
    ) -> TaskAnswer:
        from mcp.server.mcpserver.exceptions import ToolError

        if kind not in work.kinds:
            raise ToolError(f"kind {kind!r} may not be submitted here; allowed: "
                            f"{', '.join(kinds)}")
        task = Task(kind, payload) if task_id is None else Task(kind, payload, id=task_id)
        try:
            await anyio.to_thread.run_sync(work.store.add, [task])
            stored = await anyio.to_thread.run_sync(work.store.get, task.id)
        except ForepersonError as exc:
            raise ToolError(describe(exc)) from None
        if stored is None or stored.kind != kind or stored.payload != task.payload:
            raise ToolError(f"task {task.id!r} exists already with another kind or payload")
        return _task_answer(stored)

    async def task_status(
        task_id: Annotated[str, Field(description="The task (from submit_task).")],
    ) -> TaskAnswer:
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            task = await anyio.to_thread.run_sync(work.store.get, task_id)
        except ForepersonError as exc:
            raise ToolError(describe(exc)) from None
        if task is None or task.kind not in work.kinds:   # others' kinds: as if absent
            raise ToolError(f"no task {task_id!r}")
        return _task_answer(task)

    server.add_tool(submit_task, description="Submit a task for foreperson's workers; "
                                             "answers at once with its id and status.")
    server.add_tool(task_status, description="A task's status, and its result once "
                                             "COMPLETED.")


def mcp_server(target: Agent[Any] | Machine, *, store: TaskStore | None = None,
               agents: Mapping[str, Any] | None = None, work: WorkTools | None = None,
               name: str | None = None, user_id: str | None = None,
               run_timeout_s: float = RUN_TIMEOUT_S) -> "MCPServer":
    """An MCP server (the SDK's ``MCPServer``) whose tools run ``target``.

    Args:
        target: an :class:`~foreperson.agents.Agent` (a ``Team`` is one) or a
            :class:`~foreperson.fsm.Machine`.
        store: a task store: agent runs are durable (a :class:`~foreperson.runtime.Runtime`
            over it) and machine runs journaled, and the ``_resume`` tool is offered.
            None: runs keep nothing.
        agents: a machine's agents (``{name: Agent}``); needed for a machine.
        work: the work layer's tools, or None (the default: not offered).
        name: the server's name and the entry tool's (default the target's name).
        user_id: the user every run is recorded for (None: anonymous runs).
        run_timeout_s: seconds one call may run before it is stopped (> 0).

    Returns:
        The server; serve it with :func:`serve_stdio` or :func:`serve_http`.

    Raises:
        MissingDependency: the mcp extra is not installed.
        ConfigurationError: a machine without agents, agents without a machine, a
            non-positive timeout, or a target that is neither.
    """
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError as exc:
        raise MissingDependency("serving over MCP needs the mcp extra: pip install "
                                "'foreperson[mcp]'") from exc
    if run_timeout_s <= 0:
        raise ConfigurationError(f"run_timeout_s must be > 0 seconds, not {run_timeout_s}")
    if isinstance(target, Machine):
        if agents is None:
            raise ConfigurationError(f"serving the machine {target.spec.name!r} needs its "
                                     "agents ({name: Agent})")
        label = name or target.spec.name
    elif isinstance(target, Agent):
        if agents is not None:
            raise ConfigurationError("agents= is for a machine; an agent or a team brings "
                                     "its own workers")
        label = name or target.name
    else:
        raise ConfigurationError(f"cannot serve a {type(target).__name__} over MCP: give an "
                                 "Agent, a Team or a Machine")
    tool = _tool_name(label)
    server = MCPServer(label, instructions=f"foreperson serves {label}: call "
                                  f"{tool} with a request; answers carry the run id.")
    if isinstance(target, Machine):
        assert agents is not None
        if store is not None and not isinstance(store, Journal):
            raise ConfigurationError(f"this store ({type(store).__name__}) cannot journal a "
                                     "machine's steps")
        _machine_tools(server, target, tool, agents, store, run_timeout_s)
    else:
        runtime = Runtime(store) if store is not None else None
        _agent_tools(server, target, tool, runtime, user_id, run_timeout_s)
    if work is not None:
        _work_tools(server, work)
    return server


async def serve_stdio(server: "MCPServer") -> None:
    """Serve ``server`` on this process's stdin and stdout until the client closes them.

    Nothing else may write to stdout meanwhile (logs go to stderr)."""
    await server.run_stdio_async()


def serve_http(server: "MCPServer", *, host: str = "127.0.0.1", port: int = 8000,
               token: str | None = None, allowed_hosts: Sequence[str] = (),
               ready: Callable[[str, int], None] | None = None) -> None:
    """Serve ``server`` over streamable HTTP at ``http://HOST:PORT/mcp`` until Ctrl-C,
    behind the page's HTTP edge: the ``Host`` header checked against the accepted names
    (DNS rebinding refused with 421, whatever the bind address), ``Authorization:
    Bearer TOKEN`` required when ``token`` is set (401 otherwise), bounded connections,
    heads and timeouts (see :mod:`foreperson.observe`).

    Args:
        server: from :func:`mcp_server`.
        host: the address to bind (default loopback only).
        port: the TCP port (0: any free one).
        token: the bearer token clients must send, or None (no authentication).
        allowed_hosts: ``Host`` names accepted besides the defaults (the loopback names;
            for a non-loopback bind also the machine's names and addresses).
        ready: called with the bound host and port once the socket listens.

    Raises:
        OSError: the address cannot be bound.
        MissingDependency: uvicorn or starlette is missing (the observe extra).
    """
    from mcp.server.transport_security import TransportSecuritySettings

    from ..observe import Access, AsgiServer, Guard, default_allowed_hosts

    names = default_allowed_hosts(host) | {h.lower() for h in allowed_hosts}
    app = server.streamable_http_app(       # Guard checks the Host: the SDK need not
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        host=host)
    http = AsgiServer(Guard(app, Access(frozenset(names), token=token), realm="foreperson mcp"),
                      host=host, port=port, lifespan=True)
    if ready is not None:
        ready(http.host, http.port)
    http.serve_forever()
