"""Seed 000's model-planned decomposition: a goal in prose becomes 3-8 tasks, and the
plan is validated against the workers you have before anything is dispatched."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import anyio
from pydantic import BaseModel, Field

from ..errors import InvalidPlan
from ..models import (
    Message,
    Model,
    ModelRequestParameters,
    SystemMessage,
    UserMessage,
    infer_model,
)
from ..work import Task

__all__ = ["decompose", "decompose_sync"]


class _Subtask(BaseModel):
    kind: str = Field(description="which worker does it: one of the allowed kinds")
    payload: dict[str, Any] = Field(description="a JSON object with the arguments that kind "
                                                "needs")
    depends_on: list[int] = Field(default_factory=list,
                                  description="0-based indices of earlier subtasks that "
                                              "must finish first")


class Plan(BaseModel):
    """The structured output asked of the model."""

    tasks: list[_Subtask] = Field(description="the subtasks, in order")


_PROMPT = """You plan work for a team of workers. Break the goal into {low}-{high} \
subtasks, as independent as the goal allows.
Each subtask has:
- "kind": one of {kinds} (the workers you have; no other kind can run),
- "payload": a JSON object with the arguments that kind needs,
- "depends_on": the 0-based indices of EARLIER subtasks that must finish first (never \
its own index or a later one).
Reply with only a JSON object: {{"tasks": [...]}}."""


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        return stripped[stripped.index("\n") + 1:-3].strip()
    return stripped


def _plan_items(text: str | None, output: Any) -> list[Any]:
    """The subtasks as the model wrote them (its text, not a coerced parse: ``"0"`` is
    not an index)."""
    if not text and isinstance(output, BaseModel):
        return [item.model_dump() for item in getattr(output, "tasks", [])]
    try:
        data = json.loads(_strip_fences(text or ""))
    except json.JSONDecodeError as exc:
        raise InvalidPlan(f"the plan is not JSON ({exc}); the model must reply with only "
                          '{"tasks": [...]}') from None
    if isinstance(data, dict):
        data = data.get("tasks")
    if not isinstance(data, list):
        raise InvalidPlan('the plan must be {"tasks": [...]}, a list of subtasks')
    return data


def validate_plan(items: list[Any], allowed_kinds: Collection[str], *, min_tasks: int = 3,  # noqa: C901 - one check per way a decomposed plan is wrong
                  max_tasks: int = 8, run_id: str | None = None) -> list[Task]:
    """Turn a plan (a list of ``{"kind", "payload", "depends_on"}``) into tasks, or
    refuse it.

    Seed 000: "a plan produced by a model is untrusted input": an unknown kind would
    never be eligible for any worker and a cycle would never become ready, so both
    (and every other defect) are refused before a single task is dispatched.

    Args:
        items: the subtasks, in order.
        allowed_kinds: the kinds your workers can do.
        min_tasks: fewest subtasks accepted (default 3).
        max_tasks: most subtasks accepted (default 8).
        run_id: the run the tasks belong to (``Task.run_id``), or None.

    Returns:
        The tasks, ``depends_on`` holding the earlier tasks' ids.

    Raises:
        InvalidPlan: too few or too many subtasks, a subtask that is not an object, an
            unknown kind, a payload that is not a JSON object, ``depends_on`` that is not
            a list of indices, or a dependency on its own or a later (or missing)
            index; ``index`` names the subtask and the message what to fix.
    """
    kinds = sorted(allowed_kinds)
    if not min_tasks <= len(items) <= max_tasks:
        raise InvalidPlan(f"the plan has {len(items)} subtasks; ask for {min_tasks} to "
                          f"{max_tasks}")
    tasks: list[Task] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidPlan(f"subtask {index} is {type(item).__name__}, not an object with "
                              '"kind", "payload" and "depends_on"', index=index)
        kind = item.get("kind")
        if not isinstance(kind, str) or kind not in allowed_kinds:
            raise InvalidPlan(f"subtask {index} has unknown kind {kind!r}: no worker does it; "
                              f"use one of {kinds}", index=index)
        payload = item.get("payload", {})
        if not isinstance(payload, dict):
            raise InvalidPlan(f"subtask {index} ({kind}) has a payload of type "
                              f"{type(payload).__name__}; it must be a JSON object of the "
                              "arguments", index=index)
        depends = item.get("depends_on", [])
        if not isinstance(depends, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) for d in depends):
            raise InvalidPlan(f"subtask {index} ({kind}): depends_on must be a list of "
                              f"0-based subtask indices, got {depends!r}", index=index)
        task = Task(kind, payload, run_id=run_id)
        for dep in depends:
            if dep == index:
                raise InvalidPlan(f"subtask {index} ({kind}) depends on itself; it could "
                                  "never become ready", index=index)
            if dep > index:
                raise InvalidPlan(f"subtask {index} ({kind}) depends on the later subtask "
                                  f"{dep}: a dependency must be an earlier index (this is "
                                  "how cycles are kept out)", index=index)
            if dep < 0:
                raise InvalidPlan(f"subtask {index} ({kind}) depends on index {dep}; "
                                  "indices count from 0", index=index)
            task.depends_on.append(tasks[dep].id)
        task.check()
        tasks.append(task)
    return tasks


async def decompose(
    goal: str,
    allowed_kinds: Collection[str],
    model: Model | str,
    *,
    min_tasks: int = 3,
    max_tasks: int = 8,
    run_id: str | None = None,
) -> list[Task]:
    """Ask a model to break a goal into tasks, and validate the plan before anything is
    dispatched (seed 000, "letting a model do the decomposition").

    The model gets a structured-output request for ``{"tasks": [{"kind", "payload",
    "depends_on"}, ...]}`` (3-8 subtasks; ``depends_on`` as earlier indices); the reply
    is then checked by :func:`validate_plan`. Add the tasks with
    ``store.add(tasks)`` / ``Supervisor.add_tasks(tasks)`` (the work layer's).

    Example::

        tasks = await decompose("Brief on European payments",
                                {"research", "write_section"}, model="gpt-4o")

    Args:
        goal: the goal, in prose.
        allowed_kinds: the kinds your workers can do.
        model: the planning model (a Model or a model string).
        min_tasks: fewest subtasks accepted (default 3).
        max_tasks: most subtasks accepted (default 8).
        run_id: the run the tasks belong to, or None.

    Returns:
        The tasks, in plan order, dependencies as task ids.

    Raises:
        InvalidPlan: the plan is not JSON or fails a check (``index`` names the
            subtask).
        ModelError: the model call failed.
        ConfigurationError: no allowed kinds, or a bad model string.
    """
    if not allowed_kinds:
        raise InvalidPlan("decompose needs at least one allowed kind (the workers you have)")
    planner = infer_model(model)
    messages: list[Message] = [
        SystemMessage(_PROMPT.format(low=min_tasks, high=max_tasks,
                                     kinds=sorted(allowed_kinds))),
        UserMessage(f"GOAL: {goal}"),
    ]
    response = await planner.request(messages, ModelRequestParameters(output_type=Plan))
    items = _plan_items(response.text, response.output)
    return validate_plan(items, allowed_kinds, min_tasks=min_tasks, max_tasks=max_tasks,
                         run_id=run_id)


def decompose_sync(goal: str, allowed_kinds: Collection[str], model: Model | str,
                   **options: Any) -> list[Task]:
    """:func:`decompose` for code without an event loop.

    Args:
        goal: as :func:`decompose`.
        allowed_kinds: as :func:`decompose`.
        model: as :func:`decompose`.
        **options: as :func:`decompose`.

    Returns:
        As :func:`decompose`.

    Raises:
        As :func:`decompose`.
    """

    async def plan() -> list[Task]:
        return await decompose(goal, allowed_kinds, model, **options)

    return anyio.run(plan)
