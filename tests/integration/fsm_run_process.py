"""A state machine run in its own process, journaled to a SQLite file, for the SIGKILL
test (run as a script).

Usage: python fsm_run_process.py DB RUN_ID

Walks examples/support_router.yaml (checkpointEvery 2) with instant agents; when the
machine parks at dispatch after two hops, prints ``parked <state>`` and blocks inside
that summons until it is killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from foreperson.agents import Agent
from foreperson.fsm import UPDATE_CONTEXT, Machine, SummonResult, Summons
from foreperson.models import ToolCall, ToolReturn, UserMessage
from foreperson.testing import FunctionModel
from foreperson.work import SqliteStore

ROUTER = Path(__file__).resolve().parents[2] / "examples" / "support_router.yaml"
ANSWERS = {
    ("triage", "supervisor"): {"request": "a charge I did not make", "route": "technical"},
    ("technical", "tech_agent"): {"finding": "a leaked API token"},
}


class UntilDispatch:
    async def summon(self, summons: Summons) -> SummonResult:
        if summons.state == "dispatch":
            print(f"parked {summons.state} {summons.key}", flush=True)
            await anyio.sleep_forever()
        return SummonResult(tuple(ANSWERS[(summons.state, summons.agent)].items()))


def agents_until_dispatch() -> dict[str, Agent]:
    """Agents on function models: the two first hops answer, the supervisor at dispatch
    blocks (its summons task stays RUNNING when the process is killed)."""
    def reply(name: str):
        async def answer(messages, params):
            prompt = next(m.content for m in messages if isinstance(m, UserMessage))
            if isinstance(messages[-1], ToolReturn):
                return "done"
            if name == "supervisor" and "dispatch" in prompt.split("\n", 1)[0].lower():
                print("parked dispatch (as a task)", flush=True)
                await anyio.sleep_forever()
            state = "triage" if name == "supervisor" else "technical"
            return [ToolCall(UPDATE_CONTEXT, {"field": f, "value": v})
                    for f, v in ANSWERS[(state, name)].items()]
        return FunctionModel(answer, name=name)

    return {name: Agent(f"You are {name}.", model=reply(name), name=name)
            for name in ("supervisor", "billing_agent", "tech_agent", "security_agent")}


def main() -> None:
    db, run_id = sys.argv[1:3]
    if len(sys.argv) > 3 and sys.argv[3] == "tasks":
        Machine.from_file(ROUTER).run_sync("card", agents=agents_until_dispatch(),
                                           store=SqliteStore(db), run_id=run_id)
        return
    Machine.from_file(ROUTER).run_sync("card", summoner=UntilDispatch(),
                                       store=SqliteStore(db), run_id=run_id)


if __name__ == "__main__":
    main()
