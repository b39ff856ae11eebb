"""Tools from plain Python functions: a JSON schema from the type hints and the
docstring, arguments validated by pydantic, sync functions run in a worker thread."""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

import anyio.to_thread
import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ..errors import ConfigurationError
from ..models import ToolDefinition

__all__ = ["Tool", "as_tool", "format_validation_error", "tool"]

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns?|Raises|Yields?|Examples?|Notes?|"
    r"Attributes|See Also|Warnings?|Todo)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and its ``Args`` entries.

    Args:
        doc: the docstring, or None.

    Returns:
        ``(description, {parameter: description})``; the description is the text
        before the first section (``Args:``, ``Returns:``, ...).
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    indent: int | None = None
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line.strip()) if not line.startswith(" ") else None
        if header:
            section = header.group(1).lower()
            indent = None
            current = None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in ("args", "arguments", "parameters", "params") or not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        entry = _ARG_LINE.match(line.strip()) if width == indent else None
        if entry:
            current = entry.group(1).lstrip("*")
            params[current] = entry.group(3).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    paragraphs = re.split(r"\n\s*\n", "\n".join(description).strip())
    text = "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())
    return text, params


def format_validation_error(error: ValidationError) -> str:
    """Pydantic's errors as one short line per problem, for a model to read.

    Args:
        error: the validation error.

    Returns:
        ``"field: message; other.field: message"``.
    """
    parts = []
    for item in error.errors(include_url=False):
        loc = ".".join(str(p) for p in item["loc"]) or "(arguments)"
        parts.append(f"{loc}: {item['msg']}")
    return "; ".join(parts)


_RUN_CONTEXT = ("foreperson.agents._state", "RunContext")
"""Where :class:`~foreperson.agents.RunContext` is defined (told by name: this module
sits below the run's state and does not import it)."""


def _is_run_context(annotation: Any) -> bool:
    if isinstance(annotation, type):
        return any((getattr(k, "__module__", ""), k.__qualname__) == _RUN_CONTEXT
                   for k in annotation.__mro__)
    return isinstance(annotation, str) and annotation.split(".")[-1] == "RunContext"


def _is_async(function: Callable[..., Any]) -> bool:
    target = function
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return True
    call = getattr(target, "__call__", None)  # noqa: B004 - callable objects
    return call is not None and inspect.iscoroutinefunction(call)


@dataclass(frozen=True)
class Tool:
    """A function the model may call.

    Build one with :func:`tool` (a decorator) or :meth:`from_function`; an
    :class:`~foreperson.agents.Agent` also accepts plain functions. Parameters become the
    JSON schema's properties (types from the hints, descriptions from the docstring's
    ``Args:``); a parameter annotated :class:`~foreperson.agents.RunContext` is filled
    in by the agent (run id, user id) and hidden from the model.

    Attributes:
        function: the function, sync or async. Sync functions run in a worker thread
            (``anyio.to_thread``), so they never block the event loop. What it returns
            becomes the text the model reads (strings as they are, anything else as
            JSON); a :class:`~foreperson.models.ToolReturn` it returns is taken as the
            whole result, its ``is_error`` flag included (the call id and tool name are
            filled in), so a tool can report a correctable mistake without raising.
        name: the name the model uses.
        description: what the tool does, for the model.
        parameters: the JSON schema of the arguments.
        args_model: the pydantic model that validates the arguments.
        context_parameter: the name of the RunContext parameter, or None.
        is_async: whether ``function`` is a coroutine function.
        timeout_s: seconds a call may run (None: ``Guards.tool_timeout_s``;
            ``math.inf``: no bound for this tool, whatever the guards say). Past it the
            model gets an error result naming the bound.
        journaled: True (default): with a journal, a call is a step whose result is
            recorded, and a replay returns it without calling the function. False: the
            function runs again on replay; for tools made of steps themselves (one that
            delegates to a worker run, or spawns a worker through ``ctx.spawn``), whose
            effects must be rebuilt on replay while their own steps replay.
        replay_description: what a journal compares on replay in place of the
            description (see :class:`~foreperson.models.ToolDefinition`); None: the
            description.
        step_request: JSON values recorded with each journaled call's request, beside
            the tool's name and arguments (an MCP tool: a digest of its server's input
            schema), so that a replay whose values differ is a
            :class:`~foreperson.journal.JournalDivergence`; None: nothing more.
    """

    function: Callable[..., Any]
    name: str
    description: str
    parameters: dict[str, Any]
    args_model: type[BaseModel] = field(repr=False)
    context_parameter: str | None = None
    is_async: bool = False
    timeout_s: float | None = None
    journaled: bool = True
    replay_description: str | None = None
    step_request: dict[str, Any] | None = None

    @classmethod
    def from_function(  # noqa: C901 - each rejected kind of parameter is one branch with its own message
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout_s: float | None = None,
        journaled: bool = True,
    ) -> Tool:
        """Make a tool from a function's signature and Google-style docstring.

        Args:
            function: the function, sync or async.
            name: the tool's name (default the function's ``__name__``).
            description: what it does (default the docstring's description).
            timeout_s: seconds a call may run (see :attr:`timeout_s`; default None:
                the guards decide).
            journaled: whether a call is a journaled step (see :attr:`journaled`).

        Returns:
            The tool.

        Raises:
            ConfigurationError: ``*args`` / ``**kwargs`` / positional-only parameters, a
                name that is not ``[a-zA-Z0-9_-]{1,64}``, a type pydantic cannot make a
                schema for, or a ``timeout_s`` that is not a positive number of seconds.
        """
        tool_name = name or getattr(function, "__name__", None) or type(function).__name__
        if timeout_s is not None and not (isinstance(timeout_s, int | float) and timeout_s > 0):
            raise ConfigurationError(
                f"tool {tool_name!r}: timeout_s must be a positive number of seconds "
                f"(math.inf: no bound), got {timeout_s!r}")
        if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool_name):
            raise ConfigurationError(
                f"tool name {tool_name!r}: use 1-64 letters, digits, '_' or '-' (providers "
                "refuse other names); pass name= to rename it"
            )
        signature = inspect.signature(function)
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception:  # noqa: BLE001 - unresolvable forward references
            hints = {}
        doc_text, doc_params = parse_docstring(inspect.getdoc(function))
        fields: dict[str, Any] = {}
        context_parameter: str | None = None
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise ConfigurationError(
                    f"tool {tool_name!r}: parameter {param.name!r} is *args, **kwargs or "
                    "positional-only; a tool takes named parameters only"
                )
            annotation = hints.get(param.name, param.annotation)
            if _is_run_context(annotation):
                context_parameter = param.name
                continue
            if annotation is inspect.Parameter.empty:
                annotation = Any
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (
                annotation,
                Field(default, description=doc_params.get(param.name) or None),
            )
        try:
            args_model = create_model(
                f"{tool_name}_arguments",
                __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                **fields,
            )
            schema = args_model.model_json_schema()
        except Exception as exc:  # noqa: BLE001 - pydantic's schema errors vary
            raise ConfigurationError(
                f"tool {tool_name!r}: cannot build a JSON schema from its parameters: {exc}"
            ) from exc
        schema.pop("title", None)
        for prop_name, prop in schema.get("properties", {}).items():
            if prop.get("title") == prop_name.replace("_", " ").title():
                prop.pop("title")
        return cls(
            function=function,
            name=tool_name,
            description=(description if description is not None else doc_text) or tool_name,
            parameters=schema,
            args_model=args_model,
            context_parameter=context_parameter,
            is_async=_is_async(function),
            timeout_s=timeout_s,
            journaled=journaled,
        )

    @functools.cached_property
    def definition(self) -> ToolDefinition:
        """The tool as the model sees it."""
        return ToolDefinition(self.name, self.description, self.parameters,
                              self.replay_description)

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check the model's arguments against the signature.

        Args:
            arguments: the arguments as the model wrote them.

        Returns:
            Keyword arguments for the function, converted to the annotated types.

        Raises:
            pydantic.ValidationError: missing, unknown or ill-typed arguments.
        """
        validated = self.args_model.model_validate(arguments)
        return {name: getattr(validated, name) for name in type(validated).model_fields}

    async def call(self, kwargs: dict[str, Any], ctx: object | None = None) -> Any:
        """Run the function with validated arguments.

        Args:
            kwargs: the output of :meth:`validate`.
            ctx: the run, passed to the RunContext parameter if the tool has one.

        Returns:
            What the function returned.

        Raises:
            Exception: whatever the function raised.

        A sync function runs in a worker thread; when the call is cancelled (a timeout,
        the run's deadline) the thread is abandoned: it cannot be stopped, so it runs
        to its end in the background and its result is dropped.
        """
        if self.context_parameter is not None:
            kwargs = {**kwargs, self.context_parameter: ctx}
        if self.is_async:
            return await self.function(**kwargs)
        return await anyio.to_thread.run_sync(
            functools.partial(self.function, **kwargs), abandon_on_cancel=True)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly (a decorated function stays callable)."""
        return self.function(*args, **kwargs)


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """A :class:`Tool` as is, or a function made into one.

    Raises:
        ConfigurationError: ``value`` is neither, or the function cannot be a tool.
    """
    if isinstance(value, Tool):
        return value
    if callable(value):
        return Tool.from_function(value)
    raise ConfigurationError(f"not a tool or a function: {value!r}")


def result_text(value: Any) -> str:
    """A tool's return value as the text the model reads: strings as they are, anything
    else (numbers, dicts, dataclasses, pydantic objects) as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return pydantic_core.to_json(value, fallback=str).decode()


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    journaled: bool = True,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
    journaled: bool = True,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: make a function a :class:`Tool` (``@tool`` or ``@tool(name=...)``).

    The decorated object is still callable like the function.

    Args:
        function: the function (when used as ``@tool``).
        name: the tool's name (default the function's name).
        description: what it does (default the docstring's description).
        timeout_s: seconds a call may run, overriding ``Guards.tool_timeout_s``
            (``math.inf``: no bound); default None: the guards decide.
        journaled: False for a tool whose body must run again on replay (see
            :attr:`Tool.journaled`); default True.

    Returns:
        The tool, or a decorator that makes one.

    Raises:
        ConfigurationError: see :meth:`Tool.from_function`.
    """
    if function is not None:
        return Tool.from_function(function, name=name, description=description,
                                  timeout_s=timeout_s, journaled=journaled)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool.from_function(fn, name=name, description=description,
                                  timeout_s=timeout_s, journaled=journaled)

    return decorate
