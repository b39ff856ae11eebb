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
:data:`DEFAULT_TIMEOUT_S` (60 s) unless told otherwise; :func:`check_reachable` fails
fast, before any work, when a model's server cannot be reached at all. Blocking callers
share one event loop (:func:`run_blocking`), so their clients and connections are reused.
"""

from ._anthropic import AnthropicModel, AnthropicProvider
from ._base import Model, ModelBase, output_schema, parse_output
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
from ._retry import RetryingModel
from ._sync import run_blocking, shutdown_blocking_loop

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MESSAGES_ADAPTER",
    "PROFILES",
    "AnthropicModel",
    "AnthropicProvider",
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
    "run_blocking",
    "shutdown_blocking_loop",
]
