"""Model profiles: what an OpenAI-compatible server accepts, so one adapter can speak to
OpenAI itself and to local servers that differ in the details (the name and idea are
pydantic-ai's).

A profile is chosen by ``OpenAIProvider(profile=...)`` (a name or a
:class:`ModelProfile`), or detected: OpenAI's own API gets ``"openai"``; another server
is asked once for ``GET /models``, the first time a request needs to know (tools or a
structured output), and recognised by what it answers (llama-cpp-python's server says
``owned_by: "me"``); anything else gets ``"openai-compatible"``.

Known profiles:

================== ================================ ============= ==================
name               structured output                tool results  tokens field
================== ================================ ============= ==================
openai             ``json_schema``, ``strict: true`` ``tool`` role ``max_completion_tokens``
                   when the schema allows it
openai-compatible  ``json_schema``                  ``tool`` role ``max_tokens``
llama-cpp-python   ``json_object`` + ``schema``     user messages ``max_tokens``
================== ================================ ============= ==================

All send ``tool_choice: "auto"`` with tools (llama-cpp-python ignores tools without it).
llama-cpp-python's server (0.3.x) answers HTTP 500 to ``json_schema``; its
function-calling chat template (``--chat_format chatml-function-calling``) drops
``role: "tool"`` messages, so a tool's result is shown to the model as a user message
naming the call; and its automatic tool choice cannot write a text answer, so after a
turn of tool results the model is asked to answer (``tool_choice: "none"``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..errors import ConfigurationError

__all__ = ["PROFILES", "ModelProfile", "get_profile"]

logger = logging.getLogger("foreperson.models")

DETECT_TIMEOUT_S = 5.0
"""Seconds the one ``GET /models`` that detects a server's profile may take (the
provider's ``timeout_s`` when that is shorter)."""


@dataclass(frozen=True)
class ModelProfile:
    """How to phrase a chat-completions request for one kind of server.

    Attributes:
        name: the profile's name, e.g. ``"llama-cpp-python"``.
        structured_output: how a structured output is asked for: ``"json_schema"``
            (OpenAI's ``response_format: {"type": "json_schema", "json_schema": ...}``)
            or ``"json_object_schema"`` (``{"type": "json_object", "schema": ...}``, as
            llama-cpp-python's server accepts).
        strict_schema: send ``strict: true`` with a ``json_schema`` response format when
            the schema meets OpenAI's strict-mode rules (every object closed with
            ``additionalProperties: false`` here, and every property required); a schema
            that does not is sent without ``strict``.
        tool_choice_auto: send ``tool_choice: "auto"`` whenever tools are given.
        answer_after_tool_results: when the conversation ends with tool results, send
            ``tool_choice: "none"``: the model answers in text. For servers whose
            automatic tool choice cannot write text (llama-cpp-python's: after
            ``message:`` its grammar allows only a function name or the end of the
            turn, so every text answer is empty); on them a run has one turn of tool
            calls (one or several calls), then the answer.
        tool_results: how a tool's result goes back: ``"tool_messages"`` (``role:
            "tool"`` with the call id) or ``"user_messages"`` (one user message per
            turn of results, naming each call and its arguments, for chat templates
            that drop the tool role; the assistant's tool-call turn is sent with
            empty text instead of none).
        max_tokens_field: the request field for ``ModelSettings.max_tokens``
            (``"max_tokens"``, or ``"max_completion_tokens"`` which OpenAI's
            o-series require).
    """

    name: str
    structured_output: Literal["json_schema", "json_object_schema"] = "json_schema"
    strict_schema: bool = False
    tool_choice_auto: bool = True
    answer_after_tool_results: bool = False
    tool_results: Literal["tool_messages", "user_messages"] = "tool_messages"
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"

    def with_changes(self, **changes: Any) -> ModelProfile:
        """A copy with some fields replaced, e.g. ``get_profile("openai-compatible")
        .with_changes(tool_choice_auto=False)``.

        Raises:
            ConfigurationError: an unknown field name.
        """
        unknown = set(changes) - set(self.__dataclass_fields__)
        if unknown:
            raise ConfigurationError(f"ModelProfile has no field(s) {sorted(unknown)}; "
                                     f"known: {sorted(self.__dataclass_fields__)}")
        return replace(self, **changes)


PROFILES: Mapping[str, ModelProfile] = {
    "openai": ModelProfile(
        "openai", strict_schema=True, max_tokens_field="max_completion_tokens"
    ),
    "openai-compatible": ModelProfile("openai-compatible"),
    "llama-cpp-python": ModelProfile(
        "llama-cpp-python", structured_output="json_object_schema",
        tool_results="user_messages", answer_after_tool_results=True,
    ),
}
"""The known profiles by name (see the module's table)."""


def get_profile(profile: str | ModelProfile) -> ModelProfile:
    """A profile by name, or the profile given.

    Args:
        profile: a name of :data:`PROFILES` or a :class:`ModelProfile`.

    Returns:
        The profile.

    Raises:
        ConfigurationError: an unknown name (the message lists the known ones).
    """
    if isinstance(profile, ModelProfile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        raise ConfigurationError(
            f"unknown model profile {profile!r}; known: {', '.join(sorted(PROFILES))} "
            "(or pass a ModelProfile)"
        ) from None


def profile_from_models_list(body: Any) -> ModelProfile:
    """Recognise a server by its ``GET /models`` answer.

    Args:
        body: the decoded JSON answer.

    Returns:
        ``llama-cpp-python`` when a model entry says ``owned_by: "me"`` (what
        llama-cpp-python's server answers); otherwise ``openai-compatible``.
    """
    data = body.get("data") if isinstance(body, dict) else None
    for entry in data if isinstance(data, list) else ():
        if isinstance(entry, dict) and entry.get("owned_by") == "me":
            return PROFILES["llama-cpp-python"]
    return PROFILES["openai-compatible"]


def strict_schema(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Prepare a JSON schema for OpenAI's strict structured outputs.

    Every object schema gets ``additionalProperties: false`` unless it says otherwise.
    Strict mode also needs every property listed in ``required`` and no open
    ``additionalProperties`` (a ``dict`` field); a schema that breaks either rule is
    not strict-compatible.

    Args:
        schema: a JSON schema (pydantic's ``model_json_schema``).

    Returns:
        ``(schema, compatible)``: the closed copy, and whether ``strict: true`` may be
        sent with it.
    """
    compatible = True

    def close(node: Any) -> Any:
        nonlocal compatible
        if isinstance(node, dict):
            out = {key: close(value) for key, value in node.items()}
            if out.get("type") == "object":
                extra = out.setdefault("additionalProperties", False)
                properties = out.get("properties") or {}
                if extra is not False or set(properties) - set(out.get("required") or ()):
                    compatible = False
            return out
        if isinstance(node, list):
            return [close(value) for value in node]
        return node

    return close(schema), compatible


def tool_results_text(returns: Sequence[Any], calls: Mapping[str, Any]) -> str:
    """One user message that shows a turn's tool results, for servers whose chat
    template drops ``role: "tool"`` messages.

    Args:
        returns: the turn's :class:`~foreperson.models.ToolReturn` messages, in order.
        calls: the turn's :class:`~foreperson.models.ToolCall` by id, to show each
            call's arguments next to its result.

    Returns:
        The text: per result, which call it answers and what it returned (or the error).
    """
    parts = []
    for ret in returns:
        call = calls.get(ret.call_id)
        arguments = call.arguments_json() if call is not None else "{}"
        outcome = "failed" if ret.is_error else "returned"
        parts.append(f"The tool call {ret.name}({arguments}) [id {ret.call_id}] {outcome}:\n"
                     f"{ret.content}")
    header = "Tool result:" if len(parts) == 1 else f"{len(parts)} tool results:"
    return header + "\n\n" + "\n\n".join(parts)
