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

from foreperson.fsm import Machine, SummonResult, Summons
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


def main() -> None:
    db, run_id = sys.argv[1:3]
    Machine.from_file(ROUTER).run_sync("card", summoner=UntilDispatch(),
                                       store=SqliteStore(db), run_id=run_id)


if __name__ == "__main__":
    main()
