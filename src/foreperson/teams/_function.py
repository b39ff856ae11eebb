"""Function workers: a plain Python function as a team's worker, with no model.

Seed 004's stub cells route with a rule and answer with functions, so their tables count
"model calls 0". :func:`function_worker` makes such a function an
:class:`~foreperson.agents.Agent` whose architecture calls the function instead of a
model: it is delegated to, journaled, recorded as a task and capped like any worker, and
its run counts no model call. A roster may also name the function itself; the team
wraps it.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from pydantic import BaseModel, TypeAdapter, ValidationError

from ..agents import Agent, AgentEvent, RunContext
from ..errors import ConfigurationError
from ..models import Message, ModelBase, ModelRequestParameters, ModelResponse, UserMessage

__all__ = ["function_worker"]


class NoModel(ModelBase):
    """The model of an agent that decides or works without one (a pipeline, a parallel
    fan-out, a router with a rule, a function worker): calling it is a bug, said plainly.

    Args:
        owner: the team's or the worker's name, for the message.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner

    @property
    def name(self) -> str:
        """``team:<name>``."""
        return f"team:{self.owner}"

    async def request(self, messages: Sequence[Message], params: ModelRequestParameters
                      ) -> ModelResponse:
        """Never answers.

        Raises:
            ConfigurationError: always; this agent has no model of its own.
        """
        raise ConfigurationError(
            f"{self.owner!r} has no model of its own (its shape calls none); give it "
            "a model if its architecture needs one")


@dataclass(frozen=True)
class _Call:
    """The architecture of a function worker: one call of the function per run."""

    function: Callable[..., Any]
    takes: Any            # the parameter's type: str, or a type validated from JSON
    returns: type[BaseModel] | None

    async def run(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Call the function on the run's prompt and end the run with its return value.

        Raises:
            ValueError: the prompt is not the JSON the function's parameter type needs.
            Exception: whatever the function raises (a delegation then fails with it).
        """
        prompt = next((m.content for m in reversed(ctx.messages)
                       if isinstance(m, UserMessage)), "")
        argument = self._argument(ctx.agent_name, prompt)
        if inspect.iscoroutinefunction(self.function):
            value = await self.function(argument)
        else:
            value = await anyio.to_thread.run_sync(partial(self.function, argument),
                                                   abandon_on_cancel=True)
        ctx.end("completed", output=self._output(ctx.agent_name, value))
        return
        yield  # an async generator, like every architecture

    def _argument(self, worker: str, prompt: str) -> Any:
        if self.takes is str:
            return prompt
        try:
            return TypeAdapter(self.takes).validate_json(prompt)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'input'}: "
                                 f"{e['msg']}" for e in exc.errors(include_url=False))
            raise ValueError(
                f"function worker {worker!r} takes {_type_name(self.takes)} as JSON; its "
                f"instructions were not that ({problems})") from None

    def _output(self, worker: str, value: Any) -> Any:
        if self.returns is not None and not isinstance(value, self.returns):
            try:
                return self.returns.model_validate(value)
            except ValidationError as exc:
                raise ValueError(
                    f"function worker {worker!r} must return {self.returns.__name__}: "
                    f"{exc.errors(include_url=False)[0]['msg']}") from None
        if value is None or isinstance(value, str | BaseModel):
            return value
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"function worker {worker!r} returned {type(value).__name__}, which is not "
                "JSON; return a str, a pydantic model or JSON data") from None
        return value


def function_worker(function: Callable[..., Any], *, name: str | None = None,
                    description: str | None = None) -> Agent[Any]:
    """A team worker that is a plain function: no model, no model calls.

    The function takes one argument, the worker's instructions (a router's or
    pipeline's worker gets the conversation so far, a supervisor's what it wrote in
    ``delegate``): annotated ``str`` (or not annotated) it gets the text; annotated with
    another type (a pydantic model, ``dict``...) the text is parsed as JSON into it, and
    the description a model reads ends with that type's JSON schema. It
    returns the worker's answer: a str, JSON data, or a pydantic model (a return
    annotation naming one makes it the worker's ``output_type``, so
    ``forward_message`` hands the team an instance). It may be ``async``; a plain
    function runs in a worker thread. An exception it raises is the delegation's
    failure (retried under the team's ``max_attempts``), never an answer.

    Args:
        function: ``(instructions) -> answer``, sync or async.
        name: the worker's name (default: the function's ``__name__``).
        description: what the worker does, shown to a supervisor or router model
            (default: the docstring's first paragraph, else the name).

    Returns:
        An :class:`~foreperson.agents.Agent` to put in any team's roster.

    Raises:
        ConfigurationError: not a function, or not exactly one parameter.
    """
    if not callable(function) or isinstance(function, Agent):
        raise ConfigurationError(f"function_worker takes a function, got {function!r}")
    worker = name or getattr(function, "__name__", None)
    if not worker or worker == "<lambda>":
        raise ConfigurationError(
            f"function_worker({function!r}): give the worker a name (name=...)")
    takes, returns = _signature(worker, function)
    doc = inspect.getdoc(function) or ""
    text = description if description is not None else (doc.split("\n\n")[0] or worker)
    text = " ".join(text.split())
    if takes is not str:
        schema = json.dumps(TypeAdapter(takes).json_schema(), separators=(",", ":"))
        text += f" Its instructions must be JSON matching this schema: {schema}"
    return Agent(text, model=NoModel(worker), name=worker,
                 architecture=_Call(function, takes, returns), output_type=returns)


def _signature(worker: str, function: Callable[..., Any]) -> tuple[Any, type[BaseModel] | None]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"function worker {worker!r}: its signature cannot be read") from None
    required = [p for p in signature.parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(required) != 1:
        raise ConfigurationError(
            f"function worker {worker!r} must take exactly one argument (its "
            f"instructions), it takes {len(required)}")
    try:
        hints = typing.get_type_hints(function)
    except Exception:             # an annotation naming what is not importable here
        hints = {}
    takes = hints.get(required[0].name, str)
    returned = hints.get("return")
    returns = returned if isinstance(returned, type) and issubclass(returned, BaseModel) else None
    return takes, returns


def _type_name(kind: Any) -> str:
    return getattr(kind, "__name__", None) or str(kind)


def as_worker(team: str, name: str, worker: Any) -> Agent[Any]:
    """A roster entry as an agent: an agent as it is, a plain function wrapped by
    :func:`function_worker` under its roster name.

    Raises:
        ConfigurationError: neither an agent nor a function.
    """
    if isinstance(worker, Agent):
        return worker
    if callable(worker) and not isinstance(worker, type):
        return function_worker(worker, name=name)
    raise ConfigurationError(
        f"team {team!r}: worker {name!r} is {type(worker).__name__}, not an Agent or a "
        "function (a team is an Agent too)")
