"""A durable run in its own process, for the SIGKILL tests (run as a script).

Usage: python durable_process.py SCENARIO STORE RUN_ID WORKDIR [USER]

STORE is ``sqlite:PATH`` or ``postgres:DSN|SCHEMA``. Each scenario runs until a point the
test wants to kill it at, prints one line saying so, and blocks there (the ``approval``
scenario instead parks on its approval, prints ``parked CALL_ID`` and exits):

* ``parallel``: ``slow``'s last model call waits until ``fast``'s delegation is recorded,
  then prints ``ready``;
* ``spawn``: the lead's model call after ``spawn_worker`` prints ``spawned``;
* ``nested``: the desk team's model call after its analyst finished prints ``inner-done``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import durable_agents as built

from foreperson.journal import Step


def main() -> None:
    scenario, spec, run_id, workdir = sys.argv[1:5]
    user = sys.argv[5] if len(sys.argv) > 5 else None
    runtime = built.open_runtime(spec)
    work = Path(workdir)
    fast_recorded = threading.Event()
    store = runtime.store
    put = store.put_step                    # type: ignore[attr-defined]

    def watched(step: Step) -> Step:
        stored = put(step)
        if step.kind == "delegation" and step.key.endswith("delegation:fast"):
            fast_recorded.set()
        return stored

    store.put_step = watched                # type: ignore[attr-defined]

    def announce(line: str):
        async def block() -> None:
            print(line, flush=True)
            await anyio.sleep_forever()
        return block

    async def slow_waits() -> None:
        if not await anyio.to_thread.run_sync(fast_recorded.wait, 60):
            print("fast was never recorded", flush=True)
            return
        await announce("ready")()

    if scenario == "parallel":
        team = built.parallel_team(work, block_slow=slow_waits)
        team.run_sync("do both parts", runtime=runtime, run_id=run_id, user_id=user)
    elif scenario == "spawn":
        built.spawn_team(block=announce("spawned")).run_sync(
            "write a poem", runtime=runtime, run_id=run_id, user_id=user)
    elif scenario == "nested":
        built.nested_teams(work, block_inner=announce("inner-done")).run_sync(
            "close the books", runtime=runtime, run_id=run_id, user_id=user)
    elif scenario == "approval":
        result = built.clerk(work).run_sync("refund A-7", runtime=runtime, run_id=run_id,
                                            user_id=user)
        print(f"parked {result.pending[0].call_id}" if result.pending
              else f"not parked: {result.stop_reason}", flush=True)
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    runtime.close()


if __name__ == "__main__":
    main()
