"""OpenAI-compatible chat completions: the wire format (``OpenAIChatModel``) and who is
spoken to (``OpenAIProvider``: client, base URL, key). Also covers local servers that
speak the same protocol (vLLM, llama.cpp, Ollama) through ``base_url``.

Servers differ in details (the form of a structured-output schema, whether tool results
may use the ``tool`` role, which tokens field they read): a
:class:`~foreperson.models.ModelProfile` says which, chosen by
``OpenAIProvider(profile=...)`` or detected (see :mod:`foreperson.models._profiles`).

The ``openai`` SDK is an optional extra, imported when a provider is built.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

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
from ._profiles import (
    DETECT_TIMEOUT_S,
    PROFILES,
    ModelProfile,
    get_profile,
    profile_from_models_list,
    strict_schema,
    tool_results_text,
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

__all__ = ["OpenAIChatModel", "OpenAIProvider"]

logger = logging.getLogger("foreperson.models")

_NO_KEY_NEEDED = "not-needed"
OPENAI_API_URL = "https://api.openai.com/v1"
"""Where requests go without a ``base_url`` (the SDK's default)."""


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise MissingDependency(
            "OpenAI models need the openai SDK: pip install 'foreperson[openai]'"
        ) from exc
    return openai


class OpenAIProvider(Provider):
    """Owns the clients that reach an OpenAI-compatible server: base URL, API key,
    request timeout, and the server's :class:`~foreperson.models.ModelProfile`.

    One ``openai.AsyncOpenAI`` client is made per event loop (see
    :class:`~foreperson.models.Provider`). The SDK's own retries are off
    (``max_retries=0``): wrap the model in :class:`~foreperson.models.RetryingModel`
    (``infer_model`` does) so retries happen in one place.

    Args:
        api_key: the key; default ``$OPENAI_API_KEY``. A server given by ``base_url``
            may need none (local servers): a placeholder is sent then.
        base_url: the server, e.g. ``http://localhost:11434/v1`` for Ollama; default
            ``$OPENAI_BASE_URL``, else OpenAI's own API.
        timeout_s: seconds one request may take (default
            :data:`~foreperson.models.DEFAULT_TIMEOUT_S`, 30; connecting gets at most
            5 of them). ``ModelSettings(timeout_s=)`` overrides it per request.
        client: an ``openai.AsyncOpenAI`` to use as is, on one event loop (``api_key``,
            ``base_url`` and ``timeout_s`` are then ignored).
        extra_body: fields merged into every request's JSON body (sampling options of
            a local server, say), below what a request sets itself; default
            ``$FOREPERSON_MODEL_EXTRA_BODY`` (a JSON object), else none.
        profile: the server's profile, by name (``"openai"``, ``"openai-compatible"``,
            ``"llama-cpp-python"``) or as a :class:`~foreperson.models.ModelProfile`.
            Default: ``"openai"`` for OpenAI's own API, else detected from the server's
            ``GET /models`` answer the first time a request has tools or a structured
            output (see :mod:`foreperson.models._profiles`).
        breaker: the endpoint's circuit breaker policy (default
            :meth:`~foreperson.models.BreakerPolicy.from_env`: after 3 timeouts or
            connection failures in a row, calls fail fast for 30 s); shared by every
            provider of the process for the same base URL and model.

    The key, and a password in ``base_url`` (``https://user:key@host/v1``), never
    appear in messages, logs or ``repr``: they read ``***``.

    Raises:
        MissingDependency: the ``openai`` extra is not installed.
        ConfigurationError: no key, and no ``base_url`` to suggest a local server; an
            unknown profile name; a ``timeout_s`` that is not a positive number; an
            invalid breaker variable.
    """

    name = "openai"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client: Any = None,
        profile: str | ModelProfile | None = None,
        extra_body: Mapping[str, Any] | None = None,
        breaker: BreakerPolicy | None = None,
    ) -> None:
        self._profile: ModelProfile | None = None if profile is None else get_profile(profile)
        if client is not None:
            super().__init__(None, client, extra_body=extra_body, breaker=breaker)
            self.base_url: str | None = str(client.base_url)
            self.custom_server = _is_custom(self.base_url)
            self._set_default_profile()
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
        self.custom_server = base_url is not None and _is_custom(base_url)
        self.timeout_s = timeout_s
        timeout = timeout_for(openai, timeout_s)
        self._set_default_profile()

        def factory() -> Any:
            return openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
            )

        super().__init__(factory, extra_body=extra_body, breaker=breaker,
                         api_key=None if api_key == _NO_KEY_NEEDED else api_key)

    def _set_default_profile(self) -> None:
        if self._profile is None and not self.custom_server:
            self._profile = PROFILES["openai"]

    @property
    def endpoint(self) -> str:
        """The URL requests go to: ``base_url``, or OpenAI's API."""
        return self.base_url or OPENAI_API_URL

    @property
    def profile(self) -> ModelProfile | None:
        """The server's profile: given, or detected; None until detected."""
        return self._profile

    async def resolve_profile(self) -> ModelProfile:
        """The server's profile, detecting it on first need.

        Detection is one ``GET {base_url}/models`` within ``DETECT_TIMEOUT_S`` (5 s),
        or within ``timeout_s`` when that is shorter (no call waits longer than asked);
        its answer, whatever the status, decides for good. When the server cannot be
        reached, ``"openai-compatible"`` is used for now and detection is tried again
        on the next request.

        Returns:
            The profile.
        """
        if self._profile is not None:
            return self._profile
        openai = _import_openai()
        try:
            raw = await self.client.models.with_raw_response.list(
                timeout=min(DETECT_TIMEOUT_S, getattr(self, "timeout_s", DETECT_TIMEOUT_S)))
            body = raw.http_response.json()
        except openai.APIStatusError:
            body = None                      # answered, but no list: not one we know
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            logger.debug("profile detection at %s failed: %s", redact_url(self.endpoint),
                         self.redact(str(exc)))
            return PROFILES["openai-compatible"]
        except ValueError:
            body = None                      # not JSON
        self._profile = profile_from_models_list(body)
        logger.info("model server %s: using the %r profile", redact_url(self.endpoint),
                    self._profile.name)
        return self._profile

    def __repr__(self) -> str:
        return f"<OpenAIProvider base_url={redact_url(self.endpoint)}>"


def _is_custom(base_url: str | None) -> bool:
    """Whether ``base_url`` is another server than OpenAI's own API."""
    return bool(base_url) and not re.match(r"^https://api\.openai\.com(/|$)", str(base_url))


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
            EndpointUnavailable: the endpoint's circuit breaker is open (nothing sent).
            ModelError: HTTP error, timeout, connection error, or a reply without choices.
        """
        openai = _import_openai()
        with self.provider.guarded(self.model_name):
            profile = await self._profile(messages, params)
            kwargs = self._request_kwargs(messages, params, profile)
            try:
                completion = await self.provider.client.chat.completions.create(**kwargs)
            except openai.OpenAIError as exc:
                raise _model_error(openai, exc, self.name, self.provider) from exc
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
            EndpointUnavailable, ModelError: as :meth:`request`.
        """
        openai = _import_openai()
        text_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish_reason: str | None = None
        model_name = self.model_name
        input_tokens = output_tokens = 0
        with self.provider.guarded(self.model_name):
            profile = await self._profile(messages, params)
            kwargs = self._request_kwargs(messages, params, profile)
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
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
                                slot = calls.setdefault(piece.index,
                                                        {"id": "", "name": "", "args": ""})
                                if piece.id:
                                    slot["id"] = piece.id
                                if piece.function is not None:
                                    slot["name"] += piece.function.name or ""
                                    slot["args"] += piece.function.arguments or ""
                            if choice.finish_reason:
                                finish_reason = choice.finish_reason
            except openai.OpenAIError as exc:
                raise _model_error(openai, exc, self.name, self.provider) from exc
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

    async def _profile(
        self, messages: Sequence[Message], params: ModelRequestParameters
    ) -> ModelProfile:
        """The provider's profile; detected only when this request depends on it."""
        if self.provider.profile is not None:
            return self.provider.profile
        if params.tools or params.output_type is not None or any(
            isinstance(m, ToolReturn) for m in messages
        ):
            return await self.provider.resolve_profile()
        return PROFILES["openai-compatible"]

    def _request_kwargs(
        self, messages: Sequence[Message], params: ModelRequestParameters,
        profile: ModelProfile,
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "messages": _wire_messages(messages, profile),
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
            if profile.answer_after_tool_results and messages and isinstance(
                messages[-1], ToolReturn
            ):
                kwargs["tool_choice"] = "none"
            elif profile.tool_choice_auto:
                kwargs["tool_choice"] = "auto"
        if params.output_type is not None:
            kwargs["response_format"] = _response_format(params.output_type, profile)
        settings = params.settings
        if settings.max_tokens is not None:
            kwargs[profile.max_tokens_field] = settings.max_tokens
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.timeout_s is not None:
            kwargs["timeout"] = settings.timeout_s
        merge_extra_body(kwargs, self.provider.extra_body, settings.extra_body)
        return kwargs


def _response_format(output_type: type[BaseModel], profile: ModelProfile) -> dict[str, Any]:
    """The ``response_format`` that asks this kind of server for ``output_type``."""
    schema = output_schema(output_type)
    if profile.structured_output == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    spec: dict[str, Any] = {
        # OpenAI: a-z, A-Z, 0-9, _ and -, at most 64 characters
        "name": re.sub(r"[^A-Za-z0-9_-]", "_", output_type.__name__)[:64] or "output",
        "schema": schema,
    }
    if profile.strict_schema:
        closed, compatible = strict_schema(schema)
        if compatible:
            spec["schema"] = closed
            spec["strict"] = True
    return {"type": "json_schema", "json_schema": spec}


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


def _wire_messages(messages: Sequence[Message], profile: ModelProfile) -> list[dict[str, Any]]:
    """The conversation in the chat-completions format, as ``profile`` wants tool
    results shown."""
    if profile.tool_results == "tool_messages":
        return [_wire_message(m) for m in messages]
    wire: list[dict[str, Any]] = []
    calls: dict[str, ToolCall] = {}
    pending: list[ToolReturn] = []

    def flush() -> None:
        if pending:
            wire.append({"role": "user", "content": tool_results_text(pending, calls)})
            pending.clear()

    for message in messages:
        if isinstance(message, ToolReturn):
            pending.append(message)
            continue
        flush()
        item = _wire_message(message)
        if isinstance(message, ModelResponse) and message.tool_calls:
            calls = {call.id: call for call in message.tool_calls}
            if item["content"] is None:
                item["content"] = ""   # templates that know no tool calls print "None"
        wire.append(item)
    flush()
    return wire


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
    raise ConfigurationError(
        f"not a message: {message!r}; a conversation (message_history=) holds SystemMessage, "
        "UserMessage, ModelResponse and ToolReturn values (load saved JSON with "
        "MESSAGES_ADAPTER.validate_json)"
    )


def _model_error(openai: Any, exc: Exception, model: str,
                 provider: Provider | None = None) -> ModelError:
    """Translate an SDK error into a ModelError that says what to do, without the
    provider's key or anything that looks like one (a server may echo the key it was
    sent in its error body); the SDK error, kept as ``__cause__``, is cleaned too."""
    if provider is not None:
        redact_sdk_error(exc, provider.secrets)
    status: int | None = None
    retryable = is_retryable(exc)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = f"model {model}: HTTP {status}: {exc.message}"
        if status == 401:
            message += " (check OPENAI_API_KEY)"
        elif status == 404:
            message += " (is the model name right, and does the server serve it?)"
        elif unsupported_request(status, str(exc.message)):
            retryable = False
            message += (" (the server does not accept this request's shape: not retried; "
                        "is OpenAIProvider(profile=...) right for this server?)")
    elif isinstance(exc, openai.APITimeoutError):
        message = f"model {model}: the request timed out{timeout_note(exc)}"
    elif isinstance(exc, openai.APIConnectionError):
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
