"""A team's roster and nesting as a Mermaid flowchart."""

from __future__ import annotations

from typing import Any

from ..agents import Agent

__all__ = ["mermaid"]


def _shape(agent: Agent[Any]) -> str | None:
    from ._router import Router
    from ._shapes import Parallel, Pipeline
    from ._supervisor import TeamSupervisor

    architecture = agent.architecture
    for kind, name in ((TeamSupervisor, "supervisor"), (Router, "router"),
                       (Pipeline, "pipeline"), (Parallel, "parallel")):
        if isinstance(architecture, kind):
            return name
    return None


def _label(text: str) -> str:
    return text.replace('"', "'")


def mermaid(agent: Agent[Any]) -> str:  # noqa: C901 - one branch per team shape drawn
    """Draw a team (any agent) as a Mermaid ``flowchart TD``: a node per team (a
    hexagon, labelled with its shape) and per worker, an edge from each team to its
    workers (``delegate`` for a supervisor, ``route`` for a router), a pipeline's
    stages chained in order, a parallel team's branches joined into its merge; nested
    teams drawn the same way, each once (a team that delegates back to one above it
    gets an edge to that team's node, not a second copy).

    Args:
        agent: the team, or any agent (a plain agent is one node).

    Returns:
        The Mermaid source, one statement per line; the same team gives the same text.
    """
    lines = ["flowchart TD"]
    nodes: dict[int, str] = {}      # architecture id of a team being drawn -> node id
    count = 0

    def new_node(worker: Agent[Any], shape: str | None) -> str:
        nonlocal count
        node = f"n{count}"
        count += 1
        if shape is None:
            lines.append(f'    {node}["{_label(worker.name)}"]')
        else:
            lines.append(f'    {node}{{{{"{_label(worker.name)} ({shape})"}}}}')
        return node

    def draw(worker: Agent[Any]) -> str:  # noqa: C901 - one branch per node kind drawn
        shape = _shape(worker)
        if shape is None:
            return new_node(worker, None)
        key = id(worker.architecture)
        if key in nodes:
            return nodes[key]
        node = new_node(worker, shape)
        nodes[key] = node
        architecture: Any = worker.architecture
        roster: dict[str, Agent[Any]] = dict(architecture.roster)
        if shape in ("supervisor", "router"):
            verb = "delegate" if shape == "supervisor" else "route"
            for member in roster.values():
                lines.append(f"    {node} -->|{verb}| {draw(member)}")
            if shape == "supervisor" and architecture.allow_spawn:
                spawned = f"{node}s"
                lines.append(f'    {spawned}(["spawned workers (at most '
                             f'{architecture.max_spawned})"])')
                lines.append(f"    {node} -.->|spawn_worker| {spawned}")
        elif shape == "pipeline":
            previous = node
            for i, member in enumerate(roster.values(), 1):
                child = draw(member)
                lines.append(f"    {previous} -->|{i}| {child}")
                previous = child
        else:
            merge = architecture.merge
            children = [draw(roster[name]) for name in architecture.branches]
            for child in children:
                lines.append(f"    {node} -->|fan out| {child}")
            if merge is not None:
                joined = draw(roster[merge])
                for child in children:
                    lines.append(f"    {child} --> {joined}")
        return node

    draw(agent)
    return "\n".join(lines) + "\n"
