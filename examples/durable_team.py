"""A durable team run (seed 001's runtimes, issue 11), offline: a supervisor delegates to
a researcher and to a clerk in one turn; the clerk's refund needs a human, so the run
parks in SQLite and this "process" stops. Later (here: the same script, as another
process would) a human approves the call, and the run is resumed: the researcher is not
run again, the refund happens once, and the supervisor answers.

Run: ``python examples/durable_team.py [runs.db]`` (default: a new file in a temporary
folder, so it runs the same every time); then ``foreperson runs show team-1 --db FILE
--user ada`` prints the run as a tree.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from foreperson import Agent, SqliteRuntime, Team
from foreperson.agents import Guards, ask_later
from foreperson.models import ToolCall, ToolReturn
from foreperson.testing import FunctionModel

refunds: list[str] = []


def refund(order: str) -> str:
    """Refund an order (a side effect: it must happen once).

    Args:
        order: the order id.
    """
    refunds.append(order)
    return f"refunded {order}"


def last_result(messages: Any) -> str | None:
    return messages[-1].content if isinstance(messages[-1], ToolReturn) else None


def build() -> Team:
    """The team, as every process that runs or resumes it builds it."""
    researched: list[str] = []

    def research(messages: Any, params: Any) -> str:
        researched.append("called")
        return "order A-7 was charged twice on 3 May"

    def clerk(messages: Any, params: Any) -> Any:
        result = last_result(messages)
        return f"done: {result}" if result else ToolCall("refund", {"order": "A-7"})

    def lead(messages: Any, params: Any) -> Any:
        if last_result(messages) is None:
            return [ToolCall("delegate", {"worker": "researcher", "instructions": "check A-7"}),
                    ToolCall("delegate", {"worker": "clerk", "instructions": "refund A-7"})]
        return "Sorry about the double charge: A-7 is refunded."

    researcher = Agent("Check orders.", model=FunctionModel(research), name="researcher")
    clerk_agent = Agent("Refund orders.", model=FunctionModel(clerk), name="clerk",
                        tools=[refund],
                        guards=Guards(approval=ask_later, approval_required={"refund"}))
    team = Team.supervisor(workers={"researcher": researcher, "clerk": clerk_agent},
                           instructions="Handle the customer's request.",
                           model=FunctionModel(lead), name="desk")
    team.researched = researched  # type: ignore[attr-defined]
    return team


def main() -> None:
    path = (sys.argv[1] if len(sys.argv) > 1
            else os.path.join(tempfile.mkdtemp(prefix="foreperson-"), "runs.db"))
    with SqliteRuntime(path) as runtime:
        first = build()
        parked = first.run_sync("I was charged twice for A-7", runtime=runtime,
                                run_id="team-1", user_id="ada")
        call = parked.pending[0]
        print(f"parked: {parked.stop_reason}, waiting on {call.tool} {call.arguments} "
              f"(call {call.call_id}), refunds so far: {refunds}")

        runtime.approve("team-1", call.call_id, user_id="ada")    # any process, any time

        again = build()
        result = again.resume_sync("team-1", runtime=runtime, user_id="ada")
        print(f"resumed: {result.stop_reason}: {result.text}")
        print(f"refunds: {refunds}; researcher called again: {again.researched}")   # type: ignore[attr-defined]
        print(runtime.show("team-1", user_id="ada"))
        print(f"(the run is in {path})")


if __name__ == "__main__":
    main()
