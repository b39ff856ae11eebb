"""Model strings: ``"gpt-4o"``, ``"claude-opus-4-7"``, ``"openai:NAME"``,
``"anthropic:NAME"`` (STYLE 10: address models as ``provider:model``, infer the provider
from well-known names)."""

from __future__ import annotations

import re

from ..errors import ConfigurationError
from ._base import Model
from ._circuit import BreakerPolicy
from ._profiles import ModelProfile
from ._provider import DEFAULT_TIMEOUT_S
from ._retry import DEFAULT_MAX_ATTEMPTS

__all__ = ["infer_model", "infer_provider"]

_OPENAI_NAMES = re.compile(r"^(gpt-|chatgpt-|o\d(-|$)|codex-)")
_ANTHROPIC_NAMES = re.compile(r"^claude-")
_PROVIDERS = ("openai", "anthropic")


def infer_provider(name: str, *, base_url: str | None = None) -> tuple[str, str]:
    """Split a model string into its provider and model name.

    Args:
        name: ``"provider:model"``, or a well-known model name (``gpt-…``, ``o1``/``o3``/
            ``o4-mini``…, ``chatgpt-…``: OpenAI; ``claude-…``: Anthropic).
        base_url: when given, an unknown name is taken to be served by an
            OpenAI-compatible server there (vLLM, llama.cpp, Ollama).

    Returns:
        ``(provider, model_name)``, provider being ``"openai"`` or ``"anthropic"``.

    Raises:
        ConfigurationError: empty name, or a name whose provider cannot be inferred.
    """
    name = name.strip()
    prefix, sep, rest = name.partition(":")
    if sep and prefix in _PROVIDERS:
        if not rest:
            raise ConfigurationError(f"model {name!r}: the model name after '{prefix}:' is empty")
        return prefix, rest
    if not name:
        raise ConfigurationError("model name is empty; e.g. 'gpt-4o' or 'anthropic:claude-…'")
    if _ANTHROPIC_NAMES.match(name):
        return "anthropic", name
    if _OPENAI_NAMES.match(name) or base_url is not None:
        return "openai", name
    raise ConfigurationError(
        f"model {name!r}: cannot tell the provider from the name; write 'openai:{name}' "
        f"or 'anthropic:{name}' (for a local OpenAI-compatible server, pass base_url=)"
    )


def infer_model(
    name: str | Model,
    base_url: str | None = None,
    *,
    api_key: str | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    profile: str | ModelProfile | None = None,
    breaker: BreakerPolicy | None = None,
) -> Model:
    """Turn a model string into a ready :class:`~foreperson.models.Model`.

    The model is wrapped in :class:`~foreperson.models.RetryingModel` (429, 5xx and
    timeouts retried with backoff; the SDK's own retries are off) unless
    ``max_attempts`` is 1. Its endpoint has a circuit breaker shared by the process
    (see :class:`~foreperson.models.BreakerPolicy`). A :class:`Model` passed in is
    returned unchanged.

    Args:
        name: a model string (see :func:`infer_provider`) or a Model.
        base_url: an OpenAI-compatible server (default ``$OPENAI_BASE_URL``), or another
            Anthropic endpoint for ``anthropic:`` names.
        api_key: the key; default ``$OPENAI_API_KEY`` / ``$ANTHROPIC_API_KEY``.
        max_attempts: attempts per model call, the first included (default 3).
        timeout_s: seconds one request may take (default
            :data:`~foreperson.models.DEFAULT_TIMEOUT_S`, 30), so a server that never
            answers costs at most ``max_attempts`` times this (plus 5 s of profile
            detection each, and the backoff): 108.75 s with the defaults.
        profile: for OpenAI-compatible servers, the server's
            :class:`~foreperson.models.ModelProfile` or its name (default: detected;
            see :class:`~foreperson.models.OpenAIProvider`). Not for Anthropic.
        breaker: the endpoint's circuit breaker policy (default
            :meth:`~foreperson.models.BreakerPolicy.from_env`: 3 timeouts or connection
            failures in a row, then calls fail fast for 30 s).

    Returns:
        The model.

    Raises:
        ConfigurationError: unknown name, no API key (the message says which variable
            to export), ``max_attempts`` < 1, a ``timeout_s`` that is not a positive
            number, an unknown profile, a profile for an Anthropic model, or an invalid
            ``$FOREPERSON_MODEL_BREAKER_*`` variable.
        MissingDependency: the provider's SDK is not installed (the message names the
            ``pip install 'foreperson[…]'`` that fixes it).
    """
    if not isinstance(name, str):
        return name
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ConfigurationError(f"max_attempts={max_attempts!r}: it counts the first try, so "
                                 "give an integer >= 1 (1 = no retries)")
    provider, model_name = infer_provider(name, base_url=base_url)
    model: Model
    if provider == "openai":
        from ._openai import OpenAIChatModel, OpenAIProvider

        model = OpenAIChatModel(model_name, provider=OpenAIProvider(
            api_key=api_key, base_url=base_url, timeout_s=timeout_s, profile=profile,
            breaker=breaker))
    else:
        if profile is not None:
            raise ConfigurationError(f"model {name!r}: profile= is for OpenAI-compatible "
                                     "servers; Anthropic models take none")
        from ._anthropic import AnthropicModel, AnthropicProvider

        model = AnthropicModel(model_name, provider=AnthropicProvider(
            api_key=api_key, base_url=base_url, timeout_s=timeout_s, breaker=breaker))
    if max_attempts > 1:
        from ._retry import RetryingModel

        model = RetryingModel(model, max_attempts=max_attempts)
    return model
