"""A durable run as a tree (``foreperson runs show``): its agents, their turns, each
model call (the tools it asked for, a route decision, the text), tool calls,
delegations, spawns and approvals, with status and timings, read from the journal.

A step key is a path (``agent:lead/turn:2/tool:1/delegation:writer/agent:writer/...``),
so the tree is the keys' trie; a tool call the model asked for that has nothing in the
journal is shown as such (it was running when the process stopped, or never ran).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..journal import RunRecord, Step

__all__ = ["outline_run", "render_run"]


@dataclass
class _Node:
    part: str
    step: Step | None = None
    children: dict[str, _Node] = field(default_factory=dict)
    extra: list[Step] = field(default_factory=list)   # steps keyed below a leaf part


def _short(text: Any, limit: int = 60) -> str:
    value = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False,
                                                          default=str)
    value = " ".join(value.split())
    return value if len(value) <= limit else value[:limit - 3] + "..."


def _trie(steps: Sequence[Step]) -> _Node:
    root = _Node("")
    for step in steps:
        node = root
        for part in step.key.split("/"):
            node = node.children.setdefault(part, _Node(part))
        node.step = step
    return root


def _offset(step: Step, start: datetime | None) -> str:
    if start is None or step.created_at is None:
        return ""
    return f"  +{(step.created_at - start).total_seconds():.3f}s"


def _calls(model: Step | None) -> list[dict[str, Any]]:
    if model is None or not isinstance(model.result, dict):
        return []
    return [c for c in model.result.get("tool_calls") or [] if isinstance(c, dict)]


def _model_line(step: Step, start: datetime | None) -> str:
    result = step.result if isinstance(step.result, dict) else {}
    replay = _offset(step, start)
    output = result.get("output")
    if isinstance(output, dict) and "next" in output:
        why = output.get("reasoning") or ""
        return f"model: route -> {output['next']}" + (f" ({_short(why, 50)})" if why
                                                      else "") + replay
    calls = _calls(step)
    if calls:
        names = ", ".join(_call_text(c) for c in calls)
        return f"model: calls {names}{replay}"
    return f"model: {_short(result.get('text') or '')!s}{replay}"


def _call_text(call: dict[str, Any]) -> str:
    name = call.get("name", "?")
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    if name in ("delegate", "forward_message", "read_output") and isinstance(arguments, dict):
        return f"{name}({arguments.get('worker', '?')})"
    if name == "spawn_worker" and isinstance(arguments, dict):
        return f"spawn_worker({arguments.get('role', '?')})"
    return f"{name}({_short(arguments, 40)})"


def _leaf_line(step: Step, start: datetime | None) -> str:
    result = step.result
    at = _offset(step, start)
    if step.kind == "delegation" and isinstance(result, dict):
        state = "completed" if result.get("completed") else (
            f"did not complete: {_short(result.get('error') or result.get('stop_reason'), 50)}")
        answer = result.get("output") if result.get("completed") else None
        text = f" -> {_short(answer, 40)}" if isinstance(answer, str) else ""
        return (f"delegation to {result.get('worker')}: {state}{text}  "
                f"{result.get('duration_s', 0):.3f}s  task {str(result.get('task_id'))[:12]}{at}")
    if step.kind == "spawn" and isinstance(result, dict):
        return f"spawned {result.get('role')} (id {result.get('worker_id')}){at}"
    if step.kind == "approval" and isinstance(result, dict):
        why = f": {result.get('reason')}" if result.get("reason") else ""
        return f"approval: {result.get('decision')}{why}{at}"
    if step.kind == "approval_request" and isinstance(result, dict):
        return f"approval requested for call {result.get('call_id')}{at}"
    if step.kind == "tool_call" and isinstance(result, dict):
        flag = "error: " if result.get("is_error") else ""
        return f"{flag}{_short(result.get('content'), 60)}{at}"
    return f"{step.kind}: {_short(result, 60)}{at}"


class _Renderer:
    def __init__(self, start: datetime | None) -> None:
        self.start = start
        self.lines: list[str] = []
        self.outline: list[tuple[int, str]] = []

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)
        self.outline.append((depth, text))

    def agent(self, node: _Node, depth: int) -> None:
        name = node.part.removeprefix("agent:")
        self.emit(depth, f"agent {name}")
        turns = sorted((c for c in node.children.values() if c.part.startswith("turn:")),
                       key=lambda c: int(c.part.removeprefix("turn:") or 0))
        for turn in turns:
            self.turn(turn, depth + 1)
        for child in node.children.values():
            if not child.part.startswith("turn:"):
                self.other(child, depth + 1)

    def turn(self, node: _Node, depth: int) -> None:
        model = node.children.get("model")
        number = node.part.removeprefix("turn:")
        if model is not None and model.step is not None:
            self.emit(depth, f"turn {number} {_model_line(model.step, self.start)}")
        else:
            self.emit(depth, f"turn {number} (its model call has no record yet)")
        calls = _calls(model.step if model is not None else None)
        count = max([len(calls)] + [int(p.removeprefix("tool:")) for p in node.children
                                    if p.startswith("tool:") and p[5:].isdigit()])
        for index in range(1, count + 1):
            tool = node.children.get(f"tool:{index}")
            call = calls[index - 1] if index <= len(calls) else {}
            self.tool(index, call, tool, depth + 1)
        for child in node.children.values():
            if child.part != "model" and not child.part.startswith("tool:"):
                self.other(child, depth + 1)

    def tool(self, index: int, call: dict[str, Any], node: _Node | None, depth: int) -> None:
        head = f"tool {index} {_call_text(call)}" if call else f"tool {index}"
        if node is None:
            self.emit(depth, f"{head}: no record (it was running when the run stopped, "
                             "or never ran)")
            return
        if node.step is not None:
            self.emit(depth, f"{head}: {_leaf_line(node.step, self.start)}")
        else:
            self.emit(depth, head)
        for child in node.children.values():
            self.other(child, depth + 1)

    def other(self, node: _Node, depth: int) -> None:
        if node.part.startswith("agent:"):
            self.agent(node, depth)
            return
        if node.part == "approval":     # the request, then the decision (or its absence)
            request = node.children.get("request")
            if request is not None and request.step is not None:
                self.emit(depth, _leaf_line(request.step, self.start))
            self.emit(depth, _leaf_line(node.step, self.start) if node.step is not None
                      else "approval: waiting for a human decision")
            return
        if node.step is not None:
            self.emit(depth, _leaf_line(node.step, self.start))
        elif node.children:
            self.emit(depth, node.part)
        for child in node.children.values():
            self.other(child, depth + (1 if node.step is not None or node.children else 0))


def outline_run(record: RunRecord, steps: Sequence[Step]
                ) -> tuple[list[str], list[tuple[int, str]]]:
    """The run as :func:`render_run` draws it, as data: its header lines, and each line
    of the tree with its depth (for the web page of ``foreperson serve``).

    Args:
        record: the run's record.
        steps: its journal, in order.

    Returns:
        ``(header lines, [(depth, text), ...])``.
    """
    text = render_run(record, steps)
    head = text.split("\n\n", 1)[0].splitlines()
    renderer = _Renderer(record.created_at)
    for node in _trie(steps).children.values():
        renderer.other(node, 0)
    return head, renderer.outline


def render_run(record: RunRecord, steps: Sequence[Step]) -> str:
    """The run as indented text: a header (status, user, agent, times, owner, stop
    reason, what it waits on), then each agent, turn, model call, tool call, delegation,
    spawn and approval, at its nesting level, with the time it was recorded (seconds
    after the run started).

    Args:
        record: the run's record.
        steps: its journal, in order.

    Returns:
        The text (no trailing newline).
    """
    start = record.created_at
    head = [f"run {record.run_id}  agent {record.agent}  user "
            f"{record.user_id if record.user_id is not None else '(anonymous)'}",
            f"status {record.status}" + (f"  stop_reason {record.stop_reason}"
                                         if record.stop_reason else "")
            + (f"  error {_short(record.error, 80)}" if record.error else "")]
    if record.created_at is not None and record.updated_at is not None:
        span = (record.updated_at - record.created_at).total_seconds()
        head.append(f"started {record.created_at.isoformat(timespec='seconds')}  "
                    f"last change +{span:.3f}s  {len(steps)} steps")
    if record.owner:
        until = record.lease_expires_at.isoformat(timespec="seconds") \
            if record.lease_expires_at else "?"
        head.append(f"owned by {record.owner} (lease until {until})")
    decided = {s.key for s in steps if s.kind == "approval"}
    waiting = [s for s in steps if s.kind == "approval_request"
               and s.key.removesuffix("/request") not in decided]
    for step in waiting:
        result = step.result if isinstance(step.result, dict) else {}
        head.append(f"waiting for approval: call {result.get('call_id')} "
                    f"{result.get('tool')}({_short(result.get('arguments'), 50)}) "
                    f"by {result.get('agent')}")
    renderer = _Renderer(start)
    for node in _trie(steps).children.values():
        renderer.other(node, 0)
    return "\n".join(head + [""] + renderer.lines)
