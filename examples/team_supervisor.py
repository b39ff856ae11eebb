"""A supervisor team (seed 001): a manager model delegates research and writing to two
workers, both in one turn, so they run at the same time; then it answers from their
outputs. The stream shows every delegation live, the route log keeps every decision,
and each delegation is a task in a SQLite store.

Runs offline: the manager and the workers are function models that answer from the
conversation (no network).

    python examples/team_supervisor.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

from foreperson import Agent, SqliteStore, Team
from foreperson.models import ToolCall, ToolReturn
from foreperson.teams import DelegationFinishedEvent, DelegationStartedEvent
from foreperson.testing import FunctionModel

REQUEST = "Write a three-sentence note on why tidepools matter."


def manager(messages, params):
    """Offline manager: delegate both parts in one turn, then combine the answers."""
    results = [m for m in messages if isinstance(m, ToolReturn)]
    if not results:
        return [
            ToolCall("delegate", {"worker": "researcher",
                                  "instructions": "Two facts about tidepool ecology."}),
            ToolCall("delegate", {"worker": "writer",
                                  "instructions": "One sentence on why people should care "
                                                  "about tidepools."}),
        ]
    return " ".join(r.content for r in results)


def researcher(messages, params):
    return ("Tidepools shelter anemones, sea stars and crabs between tides. "
            "They show how species cope with heat, salt and waves in hours.")


def writer(messages, params):
    return "Protect them: a footstep can crush years of growth."


def build(store: SqliteStore) -> Team:
    return Team.supervisor(
        workers={
            "researcher": Agent("Find facts and summarise them.",
                                model=FunctionModel(researcher)),
            "writer": Agent("Write short, clear sentences.", model=FunctionModel(writer)),
        },
        instructions="Split the request between the workers; answer from their outputs.",
        model=FunctionModel(manager),
        name="editor",
        store=store,                  # every delegation is a task in this store
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "team.db")
        team = build(store)
        result = None
        async for event in team.stream(REQUEST):
            if isinstance(event, DelegationStartedEvent):
                print(f"-> {event.worker}: {event.instructions}")
            elif isinstance(event, DelegationFinishedEvent):
                print(f"<- {event.worker}: {event.text}")
            elif event.kind == "final" and event.level == 0:
                result = event.result
        assert result is not None
        print(f"\n== {result.stop_reason}: {result.text}")
        print(f"model calls: {result.usage.model_calls}")
        for record in result.route_log:
            print(f"route: turn {record.turn} {record.kind} -> {record.routed_to} "
                  f"(specialist calls before: {record.specialist_calls})")
        counts = store.stats(run_id=result.run_id).counts
        print("tasks:", {status.name: n for status, n in counts.items() if n})
        store.close()
    print()
    print(team.mermaid(), end="")


if __name__ == "__main__":
    anyio.run(main)
