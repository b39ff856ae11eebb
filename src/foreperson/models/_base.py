"""The ``Model`` protocol and a base class that fills in streaming and closing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from ._messages import Message, ModelRequestParameters, ModelResponse, TextDelta

__all__ = ["Model", "ModelBase", "output_schema", "parse_output"]


@runtime_checkable
class Model(Protocol):
    """Anything that answers a conversation: messages in; text, tool calls or a
    structured output out, with the tokens the call used.

    Implementations: :class:`~foreperson.models.OpenAIChatModel`,
    :class:`~foreperson.models.AnthropicModel`, the wrapper
    :class:`~foreperson.models.RetryingModel`, and the test doubles
    :class:`~foreperson.testing.ScriptedModel` and :class:`~foreperson.testing.FunctionModel`.
    Subclass :class:`ModelBase` to get ``request_stream`` and ``aclose`` for free.
    """

    @property
    def name(self) -> str:
        """``provider:model``, e.g. ``"openai:gpt-4o"``; used in logs and the audit log."""
        ...

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelResponse:
        """Ask the model for its next reply.

        Args:
            messages: the conversation so far, oldest first.
            params: tools, output type and settings.

        Returns:
            The reply, with ``usage.model_calls == 1``.

        Raises:
            ModelError: the call failed; ``retryable`` says whether to try again.
        """
        ...

    def request_stream(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        """Like :meth:`request`, but yield text as it arrives.

        Yields:
            Zero or more :class:`TextDelta`, then exactly one :class:`ModelResponse`
            (the whole reply), last.

        Raises:
            ModelError: the call failed.
        """
        ...

    async def aclose(self) -> None:
        """Release the HTTP client, if this model owns one."""
        ...


class ModelBase:
    """Convenience base for models: streaming falls back to one whole reply, closing does
    nothing, and ``async with model:`` closes it."""

    @property
    def name(self) -> str:
        """The model's name; subclasses override."""
        return type(self).__name__

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelResponse:
        """See :meth:`Model.request`; subclasses implement it."""
        raise NotImplementedError

    async def request_stream(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        """See :meth:`Model.request_stream`. This default yields the text as one delta,
        then the reply."""
        response = await self.request(messages, params)
        if response.text and not response.tool_calls:
            yield TextDelta(response.text)
        yield response

    async def aclose(self) -> None:
        """Nothing to release by default."""

    async def __aenter__(self) -> ModelBase:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def output_schema(output_type: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a provider is given for a structured output.

    Args:
        output_type: the pydantic model the answer must match.

    Returns:
        Its JSON schema (pydantic's ``model_json_schema``).
    """
    return output_type.model_json_schema()


def parse_output(output_type: type[BaseModel] | None, text: str | None) -> BaseModel | None:
    """Validate a model's text against ``output_type``, quietly.

    Args:
        output_type: the requested pydantic model, or None.
        text: the model's text (JSON expected).

    Returns:
        The validated object, or None when nothing was requested or the text does not
        validate (the agent then reports the errors back to the model).
    """
    if output_type is None or not text:
        return None
    try:
        return output_type.model_validate_json(text)
    except ValidationError:
        return None
