"""Anthropic messages API: the wire format (``AnthropicModel``) and who is spoken to
(``AnthropicProvider``: client, base URL, key).

The ``anthropic`` SDK is an optional extra, imported when a provider is built.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from ..errors import ConfigurationError, MissingDependency, ModelError, redact_url
from ..retry import is_retryable, retry_after_seconds
from ._base import ModelBase, output_schema, parse_output
from ._circuit import BreakerPolicy
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
from ._provider import (
    DEFAULT_TIMEOUT_S,
    Provider,
    merge_extra_body,
    redact_sdk_error,
    timeout_for,
    timeout_note,
    unsupported_request,
)

__all__ = ["AnthropicModel", "AnthropicProvider"]

ANTHROPIC_API_URL = "https://api.anthropic.com"
"""Where requests go without a ``base_url`` (the SDK's default)."""

DEFAULT_MAX_TOKENS = 4096
"""Tokens per reply when ``ModelSettings.max_tokens`` is None (the API requires a value)."""


def _import_anthropic() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingDependency(
            "Anthropic models need the anthropic SDK: pip install 'foreperson[anthropic]'"
        ) from exc
    return anthropic


class AnthropicProvider(Provider):
    """Owns the clients that reach the Anthropic API: base URL, API key.

    One ``anthropic.AsyncAnthropic`` client is made per event loop (see
    :class:`~foreperson.models.Provider`). The SDK's own retries are off
    (``max_retries=0``): wrap the model in :class:`~foreperson.models.RetryingModel`
    (``infer_model`` does).

    Args:
        api_key: the key; default ``$ANTHROPIC_API_KEY``.
        base_url: another server speaking the same protocol (a proxy, a test server);
            default Anthropic's API.
        timeout_s: seconds one request may take (default
            :data:`~foreperson.models.DEFAULT_TIMEOUT_S`, 30; connecting gets at most 5
            of them). ``ModelSettings(timeout_s=)`` overrides it per request.
        client: an ``anthropic.AsyncAnthropic`` to use as is, on one event loop
            (``api_key``, ``base_url`` and ``timeout_s`` are then ignored).
        extra_body: fields merged into every request's JSON body (sampling options of
            a local server, say), below what a request sets itself; default
            ``$FOREPERSON_MODEL_EXTRA_BODY`` (a JSON object), else none.
        breaker: the endpoint's circuit breaker policy (default
            :meth:`~foreperson.models.BreakerPolicy.from_env`: after 3 timeouts or
            connection failures in a row, calls fail fast for 30 s); shared by every
            provider of the process for the same base URL and model.

    The key, and a password in ``base_url``, never appear in messages, logs or
    ``repr``: they read ``***``.

    Raises:
        MissingDependency: the ``anthropic`` extra is not installed.
        ConfigurationError: no key was given and ``$ANTHROPIC_API_KEY`` is not set,
            ``timeout_s`` is not a positive number, or a breaker variable is invalid.
    """

    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: Any = None,
        extra_body: Mapping[str, Any] | None = None,
        breaker: BreakerPolicy | None = None,
    ) -> None:
        if client is not None:
            super().__init__(None, client, extra_body=extra_body, breaker=breaker)
            self.base_url: str | None = str(client.base_url)
            return
        anthropic = _import_anthropic()
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        if api_key is None:
            raise ConfigurationError(
                "no Anthropic API key: export ANTHROPIC_API_KEY=sk-ant-... (or pass api_key=)"
            )
        self.base_url = base_url
        self.timeout_s = timeout_s
        timeout = timeout_for(anthropic, timeout_s)

        def factory() -> Any:
            return anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
            )

        super().__init__(factory, extra_body=extra_body, breaker=breaker, api_key=api_key)

    @property
    def endpoint(self) -> str:
        """The URL requests go to: ``base_url``, ``$ANTHROPIC_BASE_URL`` (which the SDK
        reads), or Anthropic's API."""
        return self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_API_URL

    def __repr__(self) -> str:
        return f"<AnthropicProvider base_url={redact_url(self.endpoint)}>"


class AnthropicModel(ModelBase):
    """A Claude model reached through the Anthropic messages API.

    System messages become the ``system`` parameter; tool results travel as
    ``tool_result`` blocks in a user turn; consecutive turns of one role are merged (the
    API wants them alternating). A structured output is requested with
    ``output_config.format`` (a JSON schema) and validated here.

    Args:
        model_name: e.g. ``"claude-opus-4-7"``.
        provider: where to send requests; default ``AnthropicProvider()`` (environment).

    Raises:
        MissingDependency, ConfigurationError: from the default provider.
    """

    def __init__(self, model_name: str, *, provider: AnthropicProvider | None = None) -> None:
        self.model_name = model_name
        self.provider = provider if provider is not None else AnthropicProvider()

    @property
    def name(self) -> str:
        """``anthropic:<model_name>``."""
        return f"anthropic:{self.model_name}"

    async def request(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelResponse:
        """One messages call. See :meth:`foreperson.models.Model.request`.

        Raises:
            EndpointUnavailable: the endpoint's circuit breaker is open (nothing sent).
            ModelError: HTTP error, timeout or connection error.
        """
        anthropic = _import_anthropic()
        kwargs = self._request_kwargs(messages, params)
        with self.provider.guarded(self.model_name):
            try:
                reply = await self.provider.client.messages.create(**kwargs)
            except anthropic.AnthropicError as exc:
                raise _model_error(anthropic, exc, self.name, self.provider) from exc
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in reply.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append(ToolCall(name=block.name, arguments=dict(block.input), id=block.id))
        text = "".join(texts) if texts else None
        return ModelResponse(
            text=text,
            tool_calls=tuple(calls),
            output=None if calls else parse_output(params.output_type, text),
            usage=Usage(
                model_calls=1,
                input_tokens=reply.usage.input_tokens or 0,
                output_tokens=reply.usage.output_tokens or 0,
            ),
            model_name=reply.model or self.model_name,
            finish_reason=reply.stop_reason,
        )

    async def request_stream(  # noqa: C901 - one branch per event type of Anthropic's stream
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> AsyncIterator[TextDelta | ModelResponse]:
        """A streamed messages call (server-sent events). See
        :meth:`foreperson.models.Model.request_stream`.

        Raises:
            EndpointUnavailable, ModelError: as :meth:`request`.
        """
        anthropic = _import_anthropic()
        kwargs = self._request_kwargs(messages, params)
        kwargs["stream"] = True
        blocks: dict[int, dict[str, str]] = {}
        model_name = self.model_name
        stop_reason: str | None = None
        input_tokens = output_tokens = 0
        with self.provider.guarded(self.model_name):
            try:
                stream = await self.provider.client.messages.create(**kwargs)
                async with stream:
                    async for event in stream:
                        if event.type == "message_start":
                            model_name = event.message.model or model_name
                            input_tokens = event.message.usage.input_tokens or 0
                            output_tokens = event.message.usage.output_tokens or 0
                        elif event.type == "content_block_start":
                            block = event.content_block
                            if block.type == "text":
                                blocks[event.index] = {"type": "text", "text": block.text or ""}
                                if block.text:
                                    yield TextDelta(block.text)
                            elif block.type == "tool_use":
                                blocks[event.index] = {"type": "tool_use", "id": block.id,
                                                       "name": block.name, "json": ""}
                        elif event.type == "content_block_delta":
                            slot = blocks.get(event.index)
                            delta = event.delta
                            if slot is None:
                                continue
                            if delta.type == "text_delta":
                                slot["text"] += delta.text
                                yield TextDelta(delta.text)
                            elif delta.type == "input_json_delta":
                                slot["json"] += delta.partial_json
                        elif event.type == "message_delta":
                            stop_reason = event.delta.stop_reason or stop_reason
                            if event.usage.input_tokens is not None:
                                input_tokens = event.usage.input_tokens
                            output_tokens = event.usage.output_tokens
            except anthropic.AnthropicError as exc:
                raise _model_error(anthropic, exc, self.name, self.provider) from exc
        texts = [b["text"] for _, b in sorted(blocks.items()) if b["type"] == "text"]
        calls = tuple(
            ToolCall(name=b["name"], arguments=_arguments(b["json"]), id=b["id"])
            for _, b in sorted(blocks.items())
            if b["type"] == "tool_use"
        )
        text = "".join(texts) if texts else None
        yield ModelResponse(
            text=text,
            tool_calls=calls,
            output=None if calls else parse_output(params.output_type, text),
            usage=Usage(model_calls=1, input_tokens=input_tokens, output_tokens=output_tokens),
            model_name=model_name,
            finish_reason=stop_reason,
        )

    async def aclose(self) -> None:
        """Close the provider's client."""
        await self.provider.aclose()

    def _request_kwargs(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in messages if isinstance(m, SystemMessage))
        settings = params.settings
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": settings.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": _wire_messages(messages),
        }
        if system:
            kwargs["system"] = system
        if params.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in params.tools
            ]
        if params.output_type is not None:
            kwargs["output_config"] = {
                "format": {
                    "type": "json_schema",
                    "schema": _closed_objects(output_schema(params.output_type)),
                }
            }
        if settings.temperature is not None:
            # this SDK no longer has a temperature argument; models that take it still
            # read it from the body
            kwargs["extra_body"] = {"temperature": settings.temperature}
        merge_extra_body(kwargs, self.provider.extra_body, settings.extra_body)
        if settings.timeout_s is not None:
            kwargs["timeout"] = settings.timeout_s
        return kwargs


def _arguments(raw: str) -> dict[str, Any] | str:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


def _closed_objects(schema: Any) -> Any:
    """A copy of ``schema`` where every object schema forbids extra properties (the
    structured-outputs API requires ``additionalProperties: false``)."""
    if isinstance(schema, dict):
        out = {k: _closed_objects(v) for k, v in schema.items()}
        if out.get("type") == "object" and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed_objects(v) for v in schema]
    return schema


def _wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:  # noqa: C901 - one branch per message kind of the wire format
    wire: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": list(blocks)})

    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, UserMessage):
            add("user", [{"type": "text", "text": message.content}])
        elif isinstance(message, ToolReturn):
            add("user", [{
                "type": "tool_result",
                "tool_use_id": message.call_id,
                "content": message.content,
                "is_error": message.is_error,
            }])
        elif isinstance(message, ModelResponse):
            blocks: list[dict[str, Any]] = []
            if message.text:
                blocks.append({"type": "text", "text": message.text})
            for call in message.tool_calls:
                try:
                    arguments = call.arguments_dict()
                except ValueError:
                    arguments = {"invalid_arguments": call.arguments}
                blocks.append(
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
                )
            if not blocks:
                blocks.append({"type": "text", "text": "(no reply)"})
            add("assistant", blocks)
        else:
            raise ConfigurationError(
                f"not a message: {message!r}; a conversation (message_history=) holds "
                "SystemMessage, UserMessage, ModelResponse and ToolReturn values (load "
                "saved JSON with MESSAGES_ADAPTER.validate_json)"
            )
    return wire


def _model_error(anthropic: Any, exc: Exception, model: str,
                 provider: Provider | None = None) -> ModelError:
    """Translate an SDK error into a ModelError that says what to do, without the
    provider's key or anything that looks like one (a server may echo the key it was
    sent in its error body); the SDK error, kept as ``__cause__``, is cleaned too."""
    if provider is not None:
        redact_sdk_error(exc, provider.secrets)
    status: int | None = None
    retryable = is_retryable(exc)
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        message = f"model {model}: HTTP {status}: {exc.message}"
        if status == 401:
            message += " (check ANTHROPIC_API_KEY)"
        elif unsupported_request(status, str(exc.message)):
            retryable = False
            message += " (the server does not accept this request's shape: not retried)"
    elif isinstance(exc, anthropic.APITimeoutError):
        message = f"model {model}: the request timed out{timeout_note(exc)}"
    elif isinstance(exc, anthropic.APIConnectionError):
        message = f"model {model}: cannot connect ({exc}); is the server at the base URL up?"
    else:
        message = f"model {model}: {type(exc).__name__}: {exc}"
    return ModelError(
        provider.redact(message) if provider is not None else message,
        model=model,
        status_code=status,
        retryable=retryable,
        retry_after_s=retry_after_seconds(exc),
    )
