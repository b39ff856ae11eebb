"""Models: the ``Model`` protocol (messages in; text, tool calls or a structured output
out; usage counted), adapters over the official SDKs, and the retry wrapper.

A model adapter speaks a wire format (:class:`OpenAIChatModel`, :class:`AnthropicModel`);
a provider owns the client, base URL and key (:class:`OpenAIProvider`,
:class:`AnthropicProvider`). :func:`infer_model` turns ``"gpt-4o"``,
``"claude-opus-4-7"`` or ``"openai:llama3.1"`` into a model. The SDKs are optional
extras, imported only when a provider is built. Test doubles live in
:mod:`foreperson.testing`.
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
from ._provider import Provider
from ._retry import RetryingModel

__all__ = [
    "MESSAGES_ADAPTER",
    "AnthropicModel",
    "AnthropicProvider",
    "Message",
    "Model",
    "ModelBase",
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
    "infer_model",
    "infer_provider",
    "output_schema",
    "parse_output",
]
