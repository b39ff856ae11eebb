"""Test doubles that ship with foreperson: a manual clock, scripted and function-driven
models that need no network, and :func:`fill_history` (a store as months of nightly jobs
leave it, for testing what history costs). Use them in your own tests."""

from __future__ import annotations

import inspect
import re
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from pydantic import BaseModel

from .models import (
    Message,
    ModelBase,
    ModelRequestParameters,
    ModelResponse,
    TextDelta,
    ToolCall,
    Usage,
    parse_output,
)
from .work.stores.fill import FillPlan, fill_history

__all__ = [
    "FillPlan",
    "FunctionModel",
    "ManualClock",
    "RecordedCall",
    "Reply",
    "ReplyFunction",
    "ScriptedModel",
    "UnexpectedModelCall",
    "UnusedReplies",
    "fill_history",
]


class ManualClock:
    """A clock that moves only when told to; thread-safe.

    Args:
        start: initial time, seconds since the Unix epoch (default 1,700,000,000).
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """Current fake time, epoch seconds."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and return the new time.

        Raises:
            ValueError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._now += seconds
            return self._now


# --- test models -----------------------------------------------------------------------
# Seed-free: STYLE 11 (test doubles are part of the product). A scripted model fails on
# an unexpected step (its queue is empty) and on unused steps; a function model decides
# each reply from the messages, so it answers the same way when a run is replayed.

Reply = str | ToolCall | Sequence[ToolCall] | BaseModel | ModelResponse | BaseException
"""One step of a test model: text; one or several tool calls; a structured output
(a pydantic object); a whole :class:`~foreperson.models.ModelResponse`; or an
exception instance, raised instead of replying (e.g. a ``ModelError`` with
``status_code=429`` to exercise retries)."""


class UnexpectedModelCall(AssertionError):
    """A :class:`ScriptedModel` was called after its last scripted reply."""


class UnusedReplies(AssertionError):
    """A :class:`ScriptedModel` still had replies when the test checked it."""


@dataclass(frozen=True)
class RecordedCall:
    """One call a test model received.

    Attributes:
        messages: the conversation it was given (a snapshot).
        params: tools, output type and settings it was given.
    """

    messages: tuple[Message, ...]
    params: ModelRequestParameters

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered in this call."""
        return [t.name for t in self.params.tools]


def _words(text: str | None) -> int:
    return len(text.split()) if text else 0


def _message_words(message: Message) -> int:
    if isinstance(message, ModelResponse):
        return _words(message.text) + sum(
            1 + _words(c.arguments_json().replace(",", " ")) for c in message.tool_calls
        )
    return _words(message.content)


class _TestModel(ModelBase):
    """Shared by the test models: turns a :data:`Reply` into a response, records calls,
    estimates tokens (one per word, so limits can be tested), streams word by word.

    Like a real server, a text reply (a ``str``) longer than the request's
    ``settings.max_tokens`` words is cut to that many words and comes back with
    ``finish_reason="length"``; a scripted :class:`~foreperson.models.ModelResponse` is
    returned as written."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.calls: list[RecordedCall] = []

    @property
    def name(self) -> str:
        """``test:<name>``."""
        return f"test:{self._name}"

    def _record(self, messages: Sequence[Message], params: ModelRequestParameters) -> None:
        self.calls.append(RecordedCall(tuple(messages), params))

    def _respond(  # noqa: C901 - one branch per kind of scripted reply
        self, reply: Reply, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelResponse:
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ModelResponse):
            response = reply
        elif isinstance(reply, str):
            cap = params.settings.max_tokens
            words = reply.split()
            if cap is not None and len(words) > cap:
                response = ModelResponse(text=" ".join(words[:cap]), finish_reason="length")
            else:
                response = ModelResponse(text=reply, finish_reason="stop")
        elif isinstance(reply, ToolCall):
            response = ModelResponse(tool_calls=(reply,), finish_reason="tool_calls")
        elif isinstance(reply, BaseModel):
            response = ModelResponse(text=reply.model_dump_json(), finish_reason="stop")
        elif isinstance(reply, Sequence) and all(isinstance(c, ToolCall) for c in reply):
            calls = tuple(c for c in reply if isinstance(c, ToolCall))
            response = ModelResponse(tool_calls=calls, finish_reason="tool_calls")
        else:
            raise TypeError(
                f"{self.name}: cannot reply with {reply!r}; use text, ToolCall(s), a pydantic "
                "object, a ModelResponse or an exception"
            )
        # ids follow from the conversation (not from a counter), so a replayed run
        # gets the same ids
        seen = sum(len(m.tool_calls) for m in messages if isinstance(m, ModelResponse))
        named = [
            call if call.id else replace(call, id=f"call_{seen + i + 1}")
            for i, call in enumerate(response.tool_calls)
        ]
        output = response.output
        if output is None and not named and params.output_type is not None:
            if isinstance(reply, params.output_type):
                output = reply
            else:
                output = parse_output(params.output_type, response.text)
        usage = response.usage
        if usage.input_tokens == 0 and usage.output_tokens == 0:
            out_words = _message_words(replace(response, tool_calls=tuple(named)))
            usage = Usage(
                model_calls=1,
                input_tokens=max(1, sum(_message_words(m) for m in messages)),
                output_tokens=max(1, out_words),
            )
        return replace(
            response,
            tool_calls=tuple(named),
            output=output,
            usage=usage,
            model_name=response.model_name or self.name,
        )

    async def request_stream(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        """Like ``request``; the text arrives one word at a time."""
        response = await self.request(messages, params)
        if response.text and not response.tool_calls:
            for piece in re.findall(r"\S+\s*|\s+", response.text):
                yield TextDelta(piece)
        yield response


class ScriptedModel(_TestModel):
    """A model that gives scripted replies, in order, and records every call.

    It fails loudly: a call after the last reply raises :class:`UnexpectedModelCall`,
    and :meth:`assert_all_used` (run at the end of a ``with`` / ``async with`` block)
    raises :class:`UnusedReplies` when replies are left.

    Example::

        model = ScriptedModel([ToolCall("add", {"a": 1, "b": 2}), "3"])
        with model:
            result = await Agent("Add.", model=model, tools=[add]).run("1+2?")
        assert model.named[1].messages[-1].content == "3"

    Args:
        replies: the replies, in order (see :data:`Reply`).
        name: a name for messages and the audit log (default ``"scripted"``).
    """

    def __init__(self, replies: Iterable[Reply] = (), *, name: str = "scripted") -> None:
        super().__init__(name)
        self._replies: deque[Reply] = deque(replies)
        self._lock = threading.Lock()

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def remaining(self) -> list[Reply]:
        """Replies not used yet."""
        with self._lock:
            return list(self._replies)

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelResponse:
        """Record the call and give the next reply.

        Raises:
            UnexpectedModelCall: no reply is left.
            BaseException: the scripted exception, when the step is one.
        """
        self._record(messages, params)
        with self._lock:
            if not self._replies:
                last = messages[-1] if messages else None
                raise UnexpectedModelCall(
                    f"{self.name}: call {len(self.calls)} was not scripted (all replies "
                    f"used); last message: {last!r}"
                )
            reply = self._replies.popleft()
        return self._respond(reply, messages, params)

    def assert_all_used(self) -> None:
        """Check every scripted reply was consumed.

        Raises:
            UnusedReplies: some replies were never asked for.
        """
        left = self.remaining
        if left:
            raise UnusedReplies(
                f"{self.name}: {len(left)} scripted repl{'y was' if len(left) == 1 else 'ies were'}"
                f" never used: {left!r}"
            )

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.assert_all_used()

    async def __aenter__(self) -> ScriptedModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if not exc_info or exc_info[0] is None:
            self.assert_all_used()


ReplyFunction = Callable[
    [Sequence[Message], ModelRequestParameters], Reply | Awaitable[Reply]
]


class FunctionModel(_TestModel):
    """A model whose every reply is decided by a function of the conversation, so a
    replayed run gets the same answers; every call is recorded.

    Example::

        def reply(messages, params):
            last = messages[-1]
            if isinstance(last, ToolReturn):
                return f"the sum is {last.content}"
            return ToolCall("add", {"a": 1, "b": 2})

        agent = Agent("Add.", model=FunctionModel(reply), tools=[add])

    Args:
        function: ``(messages, params) -> Reply`` (see :data:`Reply`), sync or async.
        name: a name for messages and the audit log (default the function's name).
    """

    def __init__(self, function: ReplyFunction, *, name: str | None = None) -> None:
        super().__init__(name or str(getattr(function, "__name__", "function")))
        self.function = function

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelResponse:
        """Record the call and ask the function for the reply.

        Raises:
            BaseException: what the function raised, or the exception it returned.
        """
        self._record(messages, params)
        reply = self.function(messages, params)
        if inspect.isawaitable(reply):
            reply = await reply
        return self._respond(reply, messages, params)
