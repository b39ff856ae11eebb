"""A typed router (seed 004): after each specialist, the router's model returns a
RouteDecision (the next specialist, or FINISH); plain code reads the specialist-call
counter before following it.

1. Larkspur's outage request: operations, then billing, then FINISH: 5 model calls, 3
   of them routing; a follow-up on the same thread costs 3 more.
2. A router that never says FINISH is stopped by the counter: 7 decisions, 6 drafts,
   and the answer is the last draft (stop reason "cap"), not an error.

Runs offline with function models.

    python examples/team_router.py
"""

from __future__ import annotations

from foreperson import Agent, Team
from foreperson.models import SystemMessage, UserMessage
from foreperson.teams import FINISH, RouteDecision, Thread
from foreperson.testing import FunctionModel

OUTAGE = "My server went down last night. Do I get service credits?"
FOLLOW_UP = "How do I claim them?"


def larkspur_router(messages, params) -> RouteDecision:
    """Offline router: read who has answered since the last request, pick who is next."""
    last_request = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage)
                       and not m.content.startswith("Worker runs so far"))
    request = messages[last_request].content
    answered = {m.text.split("]")[0].strip("[") for m in messages[last_request + 1:]
                if getattr(m, "text", None)}
    wanted = ["operations", "billing"] if "went down" in request else ["billing"]
    for worker in wanted:
        if worker not in answered:
            return RouteDecision(next=worker, reasoning=f"{worker} has not answered yet")
    return RouteDecision(next=FINISH, reasoning="every part is answered")


def specialist(name: str, answer: str) -> Agent:
    return Agent(f"You are Larkspur's {name} specialist.",
                 model=FunctionModel(lambda messages, params: answer), name=name)


def outage() -> None:
    team = Team.router(
        workers={
            "operations": specialist("operations", "A storage node failed at 01:12; "
                                                   "service was back at 02:10."),
            "billing": specialist("billing", "Outages over 30 minutes earn a 10 % credit "
                                             "on the month; claim it in the portal."),
            "data": specialist("data", "No data was lost."),
        },
        model=FunctionModel(larkspur_router),
        name="supervisor",
        # the answer on FINISH, written by code (no model call): every output of the run
        finalize=lambda delegations: " ".join(d.answer for d in delegations if d.completed),
    )
    thread = Thread()
    result = team.run_sync(OUTAGE, thread=thread)
    print(f"== {result.stop_reason}: {result.text}")
    print(f"model calls: {result.usage.model_calls} ({len(result.route_log)} routing)")
    for record in result.route_log:
        print(f"  decided {record.decision:10} at counter {record.specialist_calls} "
              f"-> {record.routed_to}: {record.reasoning}")
    print("transcript:", [getattr(m, "content", None) or m.model_name
                          for m in result.messages if not isinstance(m, SystemMessage)])
    follow = team.run_sync(FOLLOW_UP, thread=thread)
    print(f"follow-up: {follow.usage.model_calls} model calls: {follow.text}")


def never_finishing() -> None:
    drafts = {"n": 0}

    def writer(messages, params) -> str:
        drafts["n"] += 1
        return f"draft {drafts['n']}"

    team = Team.router(
        workers={"writer": Agent("Write drafts.", model=FunctionModel(writer)),
                 "critic": Agent("Critique.", model=FunctionModel(lambda m, p: "no"))},
        model=FunctionModel(lambda m, p: RouteDecision(next="writer", reasoning="again")),
        max_specialist_calls=6,
    )
    result = team.run_sync("Write a post about tidepools.")
    last = result.route_log[-1]
    print(f"\n== {result.stop_reason}: {result.text}")
    print(f"decisions: {len(result.route_log)}, specialist calls: {result.specialist_calls}, "
          f"last decision {last.decision!r} overridden by {last.overridden_by!r} "
          f"-> {last.routed_to}")


if __name__ == "__main__":
    outage()
    never_finishing()
