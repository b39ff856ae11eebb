"""A two-level hierarchy (seed 004): a CEO router over two teams, each an agent with a
shape of its own: an accounts team (its own router, the accounts lead, over billing and
data) and a platform team (a fixed pipeline over operations).

Each level keeps its own counters and route log: the CEO's log holds only the CEO's
decisions, and its specialist counter counts the two teams, not the workers inside them
(seed 004's double-counting trap). The outage request costs 7 model calls, 5 of them
routing; a follow-up on the thread costs 5. Every level's delegations are tasks in one
store, linked child to parent.

Runs offline with function models.

    python examples/team_hierarchy.py
"""

from __future__ import annotations

import anyio

from foreperson import Agent, Team
from foreperson.models import UserMessage
from foreperson.teams import FINISH, RouteDecision, RouteDecisionEvent, Thread
from foreperson.testing import FunctionModel

OUTAGE = "My server went down last night. Do I get service credits?"
FOLLOW_UP = "How do I claim them?"


def router(plan: dict[str, list[str]]):
    """An offline router: for the last request, the workers in ``plan`` (by a keyword of
    the request), each once, then FINISH."""

    def decide(messages, params) -> RouteDecision:
        last = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage)
                   and not m.content.startswith("Worker runs so far"))
        request = messages[last].content
        answered = {m.text.split("]")[0].strip("[") for m in messages[last + 1:]
                    if getattr(m, "text", None)}
        wanted = next(workers for word, workers in plan.items() if word in request)
        for worker in wanted:
            if worker not in answered:
                return RouteDecision(next=worker, reasoning=f"{worker} is needed")
        return RouteDecision(next=FINISH, reasoning="answered")

    return FunctionModel(decide)


def specialist(name: str, answer: str) -> Agent:
    return Agent(f"You are Larkspur's {name} specialist.",
                 model=FunctionModel(lambda messages, params: answer), name=name)


def build() -> Team:
    billing = specialist("billing", "Outages over 30 minutes earn a 10 % credit; claim it "
                                    "in the portal under Billing > Credits.")
    data = specialist("data", "No data was lost.")
    operations = specialist("operations", "A storage node failed; service was back at 02:10.")
    accounts = Team.router(workers={"billing": billing, "data": data}, name="accounts",
                           model=router({"went down": ["billing"], "claim": ["billing"]}),
                           max_specialist_calls=4)
    platform = Team.pipeline([operations], name="platform")
    return Team.router(
        workers={"accounts": accounts, "platform": platform}, name="ceo",
        model=router({"went down": ["platform", "accounts"], "claim": ["accounts"]}),
        max_specialist_calls=4,
        finalize=lambda delegations: " ".join(d.answer for d in delegations if d.completed))


def main() -> None:
    ceo = build()
    thread = Thread()

    async def streamed(prompt: str):
        decisions = []
        result = None
        async for event in ceo.stream(prompt, thread=thread):
            if isinstance(event, RouteDecisionEvent):
                decisions.append(f"{'  ' * event.level}{event.agent}: "
                                 f"{event.record.decision} (counter "
                                 f"{event.record.specialist_calls})")
            elif event.kind == "final" and event.level == 0:
                result = event.result
        return decisions, result

    decisions, result = anyio.run(streamed, OUTAGE)
    print(f"== {result.stop_reason}: {result.text}")
    print(f"model calls: {result.usage.model_calls}, routing decisions: {len(decisions)}")
    print("decisions, by level:")
    for line in decisions:
        print(f"  {line}")
    print(f"the CEO's own log: {[r.decision for r in result.route_log]}, "
          f"its counter: {result.specialist_calls}")
    store = ceo.architecture.store
    tasks = store.list_tasks(run_id=result.run_id)
    by_id = {t.id: t.kind for t in tasks}
    print("tasks:", ", ".join(f"{t.kind}<-{by_id.get(t.parent_id, 'ceo')}" for t in tasks))

    decisions, follow = anyio.run(streamed, FOLLOW_UP)
    print(f"\nfollow-up: {follow.usage.model_calls} model calls: {follow.text}")
    print()
    print(ceo.mermaid(), end="")


if __name__ == "__main__":
    main()
