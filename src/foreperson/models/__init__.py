"""Models: the ``Model`` protocol (messages in; text, tool calls or a structured output
out; usage counted), adapters over the official SDKs, and the retry wrapper.

A model adapter speaks a wire format (:class:`OpenAIChatModel`, :class:`AnthropicModel`);
a provider owns the client, base URL and key (:class:`OpenAIProvider`,
:class:`AnthropicProvider`). :func:`infer_model` turns ``"gpt-4o"``,
``"claude-opus-4-7"`` or ``"openai:llama3.1"`` into a model. The SDKs are optional
extras, imported only when a provider is built. Test doubles live in
:mod:`foreperson.testing`.

A :class:`ModelProfile` adapts the OpenAI adapter to one kind of server (OpenAI's own,
llama-cpp-python's, any other OpenAI-compatible one). Requests time out after
:data:`DEFAULT_TIMEOUT_S` (30 s) unless told otherwise, and :class:`RetryingModel` makes
:data:`DEFAULT_MAX_ATTEMPTS` (3) attempts: a server that never answers costs one call at
most 108.75 s. :func:`check_reachable` fails fast, before any work, when a model's
server cannot be reached at all; an endpoint that stops answering mid-run opens its
circuit breaker (:class:`BreakerPolicy`): after 3 timeouts or connection failures in a
row its calls fail fast with :class:`EndpointUnavailable` for 30 s, then one trial call
decides. Keys and URL passwords never reach a message (:func:`foreperson.errors.redact`).
Blocking callers share one event loop (:func:`run_blocking`), so their clients and
connections are reused.
"""

from ._anthropic import AnthropicModel, AnthropicProvider
from ._base import Model, ModelBase, output_schema, parse_output
from ._circuit import (
    BREAKER_COOL_DOWN_ENV,
    BREAKER_FAILURES_ENV,
    DEFAULT_BREAKER_COOL_DOWN_S,
    DEFAULT_BREAKER_FAILURES,
    BreakerPolicy,
    CircuitBreaker,
    EndpointUnavailable,
    reset_circuit_breakers,
)
from ._infer import infer_model, infer_provider
from ._messages import (
    MESSAGES_ADAPTER,
    Message,
    ModelRequestParameters,
    ModelResponse,
    ModelSettings,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolDefinition,
    ToolReturn,
    Usage,
    UserMessage,
)
from ._openai import OpenAIChatModel, OpenAIProvider
from ._profiles import PROFILES, ModelProfile, get_profile
from ._provider import DEFAULT_TIMEOUT_S, Provider, check_reachable
from ._retry import DEFAULT_MAX_ATTEMPTS, RetryingModel
from ._sync import run_blocking, shutdown_blocking_loop

__all__ = [
    "BREAKER_COOL_DOWN_ENV",
    "BREAKER_FAILURES_ENV",
    "DEFAULT_BREAKER_COOL_DOWN_S",
    "DEFAULT_BREAKER_FAILURES",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_TIMEOUT_S",
    "MESSAGES_ADAPTER",
    "PROFILES",
    "AnthropicModel",
    "AnthropicProvider",
    "BreakerPolicy",
    "CircuitBreaker",
    "EndpointUnavailable",
    "Message",
    "Model",
    "ModelBase",
    "ModelProfile",
    "ModelRequestParameters",
    "ModelResponse",
    "ModelSettings",
    "OpenAIChatModel",
    "OpenAIProvider",
    "Provider",
    "RetryingModel",
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolDefinition",
    "ToolReturn",
    "Usage",
    "UserMessage",
    "check_reachable",
    "get_profile",
    "infer_model",
    "infer_provider",
    "output_schema",
    "parse_output",
    "reset_circuit_breakers",
    "run_blocking",
    "shutdown_blocking_loop",
]
