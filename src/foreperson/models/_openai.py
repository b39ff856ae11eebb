"""OpenAI-compatible chat completions: the wire format (``OpenAIChatModel``) and who is
spoken to (``OpenAIProvider``: client, base URL, key). Also covers local servers that
speak the same protocol (vLLM, llama.cpp, Ollama) through ``base_url``.

The ``openai`` SDK is an optional extra, imported when a provider is built.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..errors import ConfigurationError, MissingDependency, ModelError
from ..retry import is_retryable, retry_after_seconds
from ._base import ModelBase, output_schema, parse_output
from ._messages import (
    Message,
    ModelRequestParameters,
    ModelResponse,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolReturn,
    Usage,
    UserMessage,
)
from ._provider import Provider

__all__ = ["OpenAIChatModel", "OpenAIProvider"]

_NO_KEY_NEEDED = "not-needed"


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise MissingDependency(
            "OpenAI models need the openai SDK: pip install 'foreperson[openai]'"
        ) from exc
    return openai


class OpenAIProvider(Provider):
    """Owns the clients that reach an OpenAI-compatible server: base URL, API key.

    One ``openai.AsyncOpenAI`` client is made per event loop (see
    :class:`~foreperson.models.Provider`). The SDK's own retries are off
    (``max_retries=0``): wrap the model in :class:`~foreperson.models.RetryingModel`
    (``infer_model`` does) so retries happen in one place.

    Args:
        api_key: the key; default ``$OPENAI_API_KEY``. A server given by ``base_url``
            may need none (local servers): a placeholder is sent then.
        base_url: the server, e.g. ``http://localhost:11434/v1`` for Ollama; default
            ``$OPENAI_BASE_URL``, else OpenAI's own API.
        timeout_s: seconds one request may take (default 600).
        client: an ``openai.AsyncOpenAI`` to use as is, on one event loop (``api_key``,
            ``base_url`` and ``timeout_s`` are then ignored).

    Raises:
        MissingDependency: the ``openai`` extra is not installed.
        ConfigurationError: no key, and no ``base_url`` to suggest a local server.
    """

    name = "openai"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        client: Any = None,
    ) -> None:
        if client is not None:
            super().__init__(None, client)
            self.base_url: str | None = str(client.base_url)
            self.custom_server = True
            return
        openai = _import_openai()
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if api_key is None:
            if base_url is None:
                raise ConfigurationError(
                    "no OpenAI API key: export OPENAI_API_KEY=sk-... (or pass api_key=; "
                    "for a local OpenAI-compatible server pass base_url= or export "
                    "OPENAI_BASE_URL=http://localhost:8000/v1)"
                )
            api_key = _NO_KEY_NEEDED
        self.base_url = base_url
        self.custom_server = base_url is not None

        def factory() -> Any:
            return openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
            )

        super().__init__(factory)

    def __repr__(self) -> str:
        return f"<OpenAIProvider base_url={self.base_url or 'https://api.openai.com/v1'}>"


class OpenAIChatModel(ModelBase):
    """A model reached through the OpenAI chat-completions protocol.

    Tools are sent as ``function`` tools; a structured output as a ``json_schema``
    response format (and validated here); usage is read from ``usage.prompt_tokens`` /
    ``completion_tokens``. Streaming asks for usage in the last chunk
    (``stream_options.include_usage``).

    Args:
        model_name: the name the server knows, e.g. ``"gpt-4o"`` or ``"llama3.1:8b"``.
        provider: where to send requests; default ``OpenAIProvider()`` (environment).

    Raises:
        MissingDependency, ConfigurationError: from the default provider.
    """

    def __init__(self, model_name: str, *, provider: OpenAIProvider | None = None) -> None:
        self.model_name = model_name
        self.provider = provider if provider is not None else OpenAIProvider()

    @property
    def name(self) -> str:
        """``openai:<model_name>``."""
        return f"openai:{self.model_name}"

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelResponse:
        """One chat completion. See :meth:`foreperson.models.Model.request`.

        Raises:
            ModelError: HTTP error, timeout, connection error, or a reply without choices.
        """
        kwargs = self._request_kwargs(messages, params)
        openai = _import_openai()
        try:
            completion = await self.provider.client.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise _model_error(openai, exc, self.name) from exc
        if not completion.choices:
            raise ModelError(f"model {self.name}: the reply had no choices", model=self.name)
        choice = completion.choices[0]
        message = choice.message
        calls = tuple(
            ToolCall(
                name=call.function.name,
                arguments=_arguments(call.function.arguments),
                id=call.id,
            )
            for call in (message.tool_calls or ())
            if getattr(call, "function", None) is not None
        )
        text = message.content if message.content is not None else message.refusal
        usage = completion.usage
        return ModelResponse(
            text=text,
            tool_calls=calls,
            output=None if calls else parse_output(params.output_type, text),
            usage=Usage(
                model_calls=1,
                input_tokens=usage.prompt_tokens if usage else 0,
                output_tokens=usage.completion_tokens if usage else 0,
            ),
            model_name=completion.model or self.model_name,
            finish_reason=choice.finish_reason,
        )

    async def request_stream(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        """A streamed chat completion (server-sent events). See
        :meth:`foreperson.models.Model.request_stream`.

        Raises:
            ModelError: as :meth:`request`.
        """
        kwargs = self._request_kwargs(messages, params)
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
        openai = _import_openai()
        text_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish_reason: str | None = None
        model_name = self.model_name
        input_tokens = output_tokens = 0
        try:
            stream = await self.provider.client.chat.completions.create(**kwargs)
            async with stream:
                async for chunk in stream:
                    model_name = chunk.model or model_name
                    if chunk.usage is not None:
                        input_tokens = chunk.usage.prompt_tokens
                        output_tokens = chunk.usage.completion_tokens
                    for choice in chunk.choices[:1]:
                        delta = choice.delta
                        if delta.content:
                            text_parts.append(delta.content)
                            yield TextDelta(delta.content)
                        for piece in delta.tool_calls or ():
                            slot = calls.setdefault(piece.index, {"id": "", "name": "", "args": ""})
                            if piece.id:
                                slot["id"] = piece.id
                            if piece.function is not None:
                                slot["name"] += piece.function.name or ""
                                slot["args"] += piece.function.arguments or ""
                        if choice.finish_reason:
                            finish_reason = choice.finish_reason
        except openai.OpenAIError as exc:
            raise _model_error(openai, exc, self.name) from exc
        text = "".join(text_parts) if text_parts else None
        tool_calls = tuple(
            ToolCall(name=slot["name"], arguments=_arguments(slot["args"]), id=slot["id"])
            for _, slot in sorted(calls.items())
        )
        yield ModelResponse(
            text=text,
            tool_calls=tool_calls,
            output=None if tool_calls else parse_output(params.output_type, text),
            usage=Usage(model_calls=1, input_tokens=input_tokens, output_tokens=output_tokens),
            model_name=model_name,
            finish_reason=finish_reason,
        )

    async def aclose(self) -> None:
        """Close the provider's client."""
        await self.provider.aclose()

    def _request_kwargs(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "messages": [_wire_message(m) for m in messages],
        }
        if params.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in params.tools
            ]
        if params.output_type is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": params.output_type.__name__,
                    "schema": output_schema(params.output_type),
                },
            }
        settings = params.settings
        if settings.max_tokens is not None:
            # OpenAI's own API wants max_completion_tokens (o-series refuse max_tokens);
            # local servers know max_tokens best.
            key = "max_tokens" if self.provider.custom_server else "max_completion_tokens"
            kwargs[key] = settings.max_tokens
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.timeout_s is not None:
            kwargs["timeout"] = settings.timeout_s
        return kwargs


def _arguments(raw: str | None) -> dict[str, Any] | str:
    """Parsed arguments when they are a JSON object, else the raw text (the agent
    reports the problem to the model)."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


def _wire_message(message: Message) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content}
    if isinstance(message, ToolReturn):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    if isinstance(message, ModelResponse):
        wire: dict[str, Any] = {"role": "assistant", "content": message.text}
        if message.tool_calls:
            wire["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for call in message.tool_calls
            ]
        return wire
    raise TypeError(f"not a message: {message!r}")


def _model_error(openai: Any, exc: Exception, model: str) -> ModelError:
    """Translate an SDK error into a ModelError that says what to do."""
    status: int | None = None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"model {model}: HTTP {status}: {exc.message}"
        if status == 401:
            message += " (check OPENAI_API_KEY)"
        elif status == 404:
            message += " (is the model name right, and does the server serve it?)"
    elif isinstance(exc, openai.APITimeoutError):
        message = f"model {model}: the request timed out"
    elif isinstance(exc, openai.APIConnectionError):
        message = f"model {model}: cannot connect ({exc}); is the server at the base URL up?"
    else:
        message = f"model {model}: {type(exc).__name__}: {exc}"
    return ModelError(
        message,
        model=model,
        status_code=status,
        retryable=is_retryable(exc),
        retry_after_s=retry_after_seconds(exc),
    )
