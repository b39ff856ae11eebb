"""The records a model reads and writes: messages, tool calls, usage, responses.

All are dataclasses (plain data, compared by value); each message carries a ``kind``
literal so a list of them serialises and loads back through one pydantic adapter,
:data:`MESSAGES_ADAPTER`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

__all__ = [
    "MESSAGES_ADAPTER",
    "Message",
    "ModelRequestParameters",
    "ModelResponse",
    "ModelSettings",
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolDefinition",
    "ToolReturn",
    "Usage",
    "UserMessage",
]


@dataclass(frozen=True)
class Usage:
    """What a call or a run consumed.

    Usages add up with ``+``.

    Attributes:
        model_calls: requests made to a model (default 0).
        input_tokens: prompt tokens the provider reported (default 0).
        output_tokens: completion tokens the provider reported (default 0).
        tool_calls: tool calls handled, run or refused by a guard (default 0; counted by
            the agent, not the model).
    """

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            model_calls=self.model_calls + other.model_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            tool_calls=self.tool_calls + other.tool_calls,
        )


@dataclass(frozen=True)
class ToolCall:
    """The model asks for a tool to be run.

    Attributes:
        name: the tool's name.
        arguments: the arguments, as a dict, or as the raw JSON text the model wrote
            (the agent parses it; text that is not a JSON object goes back to the model
            as an error it can correct).
        id: the provider's id for this call, echoed in the :class:`ToolReturn`; empty
            means "not assigned yet" (the agent assigns ``call_<turn>_<index>``).
    """

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str = ""

    def arguments_dict(self) -> dict[str, Any]:
        """The arguments as a dict.

        Returns:
            The parsed arguments (empty text counts as ``{}``).

        Raises:
            ValueError: the arguments are text that is not a JSON object.
        """
        if isinstance(self.arguments, dict):
            return self.arguments
        if self.arguments is None:          # "no arguments", as some servers send it
            return {}
        if not isinstance(self.arguments, str):
            raise ValueError(f"arguments must be a JSON object, got "
                             f"{type(self.arguments).__name__}")
        text = self.arguments.strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        return value

    def arguments_json(self) -> str:
        """The arguments as JSON text, as sent on the wire."""
        if isinstance(self.arguments, str):
            return self.arguments or "{}"
        return json.dumps(self.arguments, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class SystemMessage:
    """Instructions for the model (the agent's ``instructions``).

    Attributes:
        content: the text.
    """

    content: str
    kind: Literal["system"] = "system"


@dataclass(frozen=True)
class UserMessage:
    """A message from the user (the prompt), or a correction the agent sends back.

    Attributes:
        content: the text.
    """

    content: str
    kind: Literal["user"] = "user"


@dataclass(frozen=True)
class ToolReturn:
    """The result of one tool call, sent back to the model.

    Attributes:
        call_id: the :attr:`ToolCall.id` this answers.
        name: the tool's name.
        content: the result as text (JSON for structured values).
        is_error: True when the call failed (unknown tool, invalid arguments, denied,
            the tool raised); ``content`` then says what went wrong so the model can
            correct itself.
    """

    call_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool_return"] = "tool_return"


@dataclass(frozen=True)
class ModelResponse:
    """One reply of a model: text, tool calls, or a structured output; with its usage.

    It is also the assistant's message in the conversation.

    Attributes:
        text: the text the model wrote, or None. With an ``output_type`` this is the JSON
            of the structured output.
        tool_calls: the tools the model asks to run, in the order it wrote them.
        output: the structured output, already validated against the requested
            ``output_type``, or None (not requested, or the text did not validate: the
            agent then validates ``text`` itself and reports errors to the model).
        usage: tokens of this call (``model_calls`` is 1 for a real call).
        model_name: the model that answered, as the provider reported it.
        finish_reason: why the model stopped, in the provider's words
            (``"stop"``, ``"tool_calls"``, ``"end_turn"``, ``"length"``, ...), or None.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    output: Any = None
    usage: Usage = field(default_factory=lambda: Usage(model_calls=1))
    model_name: str | None = None
    finish_reason: str | None = None
    kind: Literal["response"] = "response"


Message = Annotated[
    SystemMessage | UserMessage | ModelResponse | ToolReturn, Field(discriminator="kind")
]
"""Any message of a conversation, told apart by its ``kind``."""

MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
"""Serialises a conversation to JSON and back:
``MESSAGES_ADAPTER.dump_json(messages)`` / ``MESSAGES_ADAPTER.validate_json(data)``.
A structured ``output`` comes back as a plain dict."""


@dataclass(frozen=True)
class ToolDefinition:
    """A tool as the model sees it.

    Attributes:
        name: the tool's name.
        description: what it does, for the model.
        parameters: the JSON schema of its arguments (an ``object`` schema).
        replay_description: what a journal compares on replay in place of
            ``description`` (None: the description itself): the parts of it that may
            change between a run and its replay without that being a divergence stay
            out (a team's ``delegate`` tool compares its roster's names, not each
            worker's instructions, which the delegations compare themselves).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    replay_description: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ModelSettings:
    """Sampling settings passed to every request; None leaves the provider's default.

    Attributes:
        max_tokens: the most tokens one reply may have (Anthropic requires a value: its
            adapter uses 4,096 when None).
        temperature: sampling temperature.
        timeout_s: seconds one HTTP request may take before it counts as a timeout
            (None: the provider's, 30 s by default).
        extra_body: fields merged into the request's JSON body as they are, for what the
            adapters do not model (``{"top_k": 20}``, ``{"seed": 7}``, a server's own
            options). They win over the fields the adapter sets.
    """

    max_tokens: int | None = None
    temperature: float | None = None
    timeout_s: float | None = None
    extra_body: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ModelRequestParameters:
    """What a request asks of the model besides the messages.

    Attributes:
        tools: the tools the model may call.
        output_type: a pydantic model the final answer must match, or None for text.
        settings: sampling settings.
    """

    tools: Sequence[ToolDefinition] = ()
    output_type: type[BaseModel] | None = None
    settings: ModelSettings = field(default_factory=ModelSettings)


@dataclass(frozen=True)
class TextDelta:
    """A piece of text, as a streaming model produces it.

    Attributes:
        text: the new text.
    """

    text: str
    kind: Literal["text_delta"] = "text_delta"
