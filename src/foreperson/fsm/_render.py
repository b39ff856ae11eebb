"""Diagrams of a machine: Mermaid (``stateDiagram-v2``) and Graphviz dot, each guard on
its edge, so the whole routing policy can be read before a run (seed 003)."""

from __future__ import annotations

import re

from ._spec import Edge, MachineSpec

__all__ = ["render_dot", "render_mermaid"]

_MERMAID_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _label(edge: Edge) -> str | None:
    parts = []
    if edge.guard_text is not None:
        parts.append(edge.guard_text)
    if edge.on_transition:
        parts.append("/ " + ", ".join(a.describe() for a in edge.on_transition))
    return " ".join(parts) or None


def render_mermaid(spec: MachineSpec) -> str:
    """The machine as a Mermaid state diagram.

    Each edge is labelled with its guard (``&&`` between several) and its
    ``onTransition`` actions after a ``/``; ``[*]`` marks the initial state and the
    terminal ones.

    Args:
        spec: the machine.

    Returns:
        Mermaid source, starting ``stateDiagram-v2``.
    """
    ids: dict[str, str] = {}
    lines = ["stateDiagram-v2"]
    for i, name in enumerate(spec.states):
        if _MERMAID_ID.fullmatch(name) and name not in ("end", "state", "note"):
            ids[name] = name
        else:
            ids[name] = f"s{i}"
            lines.append(f'    state "{name}" as s{i}')
    lines.append(f"    [*] --> {ids[spec.initial_state]}")
    for edge in spec.edges:
        label = _label(edge)
        arrow = f"    {ids[edge.source]} --> {ids[edge.target]}"
        lines.append(arrow if label is None else f"{arrow}: {_mermaid_text(label)}")
    for name, state in spec.states.items():
        if state.terminal:
            lines.append(f"    {ids[name]} --> [*]")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    # a label ends at the line's end; '#' and ';' start entity codes / statements
    text = " ".join(text.split())
    return text.replace("#", "#35;").replace(";", "#59;")


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(spec: MachineSpec) -> str:
    """The machine as a Graphviz digraph (``dot -Tsvg``), each guard on its edge.

    Args:
        spec: the machine.

    Returns:
        dot source.
    """
    lines = [f"digraph {_dot_quote(spec.name)} {{", "    rankdir=LR;",
             '    node [shape=box, style=rounded, fontname="Helvetica"];',
             '    edge [fontname="Helvetica", fontsize=10];',
             '    "__start__" [shape=point, label=""];']
    for name, state in spec.states.items():
        if state.terminal:
            lines.append(f"    {_dot_quote(name)} [shape=doublecircle];")
    lines.append(f'    "__start__" -> {_dot_quote(spec.initial_state)};')
    for edge in spec.edges:
        label = _label(edge)
        attrs = f" [label={_dot_quote(label)}]" if label is not None else ""
        lines.append(f"    {_dot_quote(edge.source)} -> {_dot_quote(edge.target)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"
