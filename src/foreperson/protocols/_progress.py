"""One line per event of a run, for the progress a protocol reports to its client (MCP
progress notifications, A2A status updates)."""

from __future__ import annotations

from typing import Any

__all__ = ["progress_message"]


def progress_message(event: Any) -> str | None:
    """One line saying what a run's event is, for a progress notification; None for
    events not worth one (text deltas, the final event).

    Args:
        event: an event of ``Agent.stream`` (agent or team event).

    Returns:
        e.g. ``"billing: model call 1 asks for lookup_invoice"``, ``"support -> billing:
        Why was I charged twice?"``, ``"support: routes to billing"``.
    """
    kind = getattr(event, "kind", None)
    who = getattr(event, "agent", "?")
    if kind == "model_call":
        calls = event.response.tool_calls
        return (f"{who}: model call {event.turn}" + (f" asks for {', '.join(c.name for c in calls)}"
                                                     if calls else " answers"))
    if kind == "tool_result":
        return f"{who}: {event.call.name} {'failed' if event.result.is_error else 'answered'}"
    if kind == "delegation_started":
        asked = " ".join(event.instructions.split())
        return f"{who} -> {event.worker}: {asked[:120]}"
    if kind == "delegation_finished":
        why = event.error or event.stop_reason
        return f"{who} <- {event.worker}: " + ("finished" if event.completed
                                               else f"stopped ({why})")
    if kind == "route_decision":
        return f"{who}: routes to {event.record.routed_to}"
    if kind == "a2a_update":
        said = " ".join(event.text.split())
        return f"{who} ({event.state}): {said[:120]}" if said else None
    if kind in (None, "text_delta", "final", "tool_call"):
        return None
    return f"{who}: {str(kind).replace('_', ' ')}"
