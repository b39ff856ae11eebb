"""A durable run in its own process, for the SIGKILL tests (run as a script).

Usage: python durable_process.py SCENARIO STORE RUN_ID WORKDIR [USER]

STORE is ``sqlite:PATH`` or ``postgres:DSN|SCHEMA``. Each scenario runs until a point the
test wants to kill it at, prints one line saying so, and blocks there (the ``approval``
scenario instead parks on its approval, prints ``parked CALL_ID`` and exits):

* ``parallel``: ``slow``'s last model call waits until ``fast``'s delegation is recorded,
  then prints ``ready``;
* ``router``: a rule-routed router (fast, then slow); ``slow``'s last model call waits
  until ``fast``'s delegation is recorded, then prints ``ready``;
* ``spawn``: the lead's model call after ``spawn_worker`` waits until the spawn is
  recorded, then prints ``spawned``;
* ``nested``: the desk team's model call after its analyst finished waits until that
  delegation is recorded, then prints ``inner-done``.

(Steps are written behind the run, in order, so "recorded" is the journal's word, not
the moment the step returned.)
"""

from __future__ import annotations

import contextlib
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
    # steps are written behind the run: announce a point once the step the test kills
    # after is in the journal
    recorded = {"delegation:fast": threading.Event(), "spawn:poet": threading.Event(),
                "delegation:analyst": threading.Event()}
    store = runtime.store
    put = store.put_step                    # type: ignore[attr-defined]
    batch = store.batch
    uncommitted: list[str] = []
    depth = [0]

    def committed(keys: list[str]) -> None:
        for key in keys:
            for suffix, event in recorded.items():
                if key.endswith(suffix):
                    event.set()

    def watched(step: Step) -> Step:
        stored = put(step)
        if depth[0]:
            uncommitted.append(step.key)    # written when the batch commits
        else:
            committed([step.key])
        return stored

    @contextlib.contextmanager
    def watched_batch():
        depth[0] += 1
        try:
            with batch():
                yield
        finally:
            depth[0] -= 1
        if not depth[0]:
            keys, uncommitted[:] = list(uncommitted), []
            committed(keys)

    store.put_step = watched                # type: ignore[attr-defined]
    store.batch = watched_batch             # type: ignore[method-assign]

    def announce(line: str, after: str):
        async def block() -> None:
            if not await anyio.to_thread.run_sync(recorded[after].wait, 60):
                print(f"{after} was never recorded", flush=True)
                return
            print(line, flush=True)
            await anyio.sleep_forever()
        return block

    if scenario == "parallel":
        team = built.parallel_team(work, block_slow=announce("ready", "delegation:fast"))
        team.run_sync("do both parts", runtime=runtime, run_id=run_id, user_id=user)
    elif scenario == "router":
        built.routed_team(work, block_slow=announce("ready", "delegation:fast")).run_sync(
            "do both parts", runtime=runtime, run_id=run_id, user_id=user)
    elif scenario == "spawn":
        built.spawn_team(block=announce("spawned", "spawn:poet")).run_sync(
            "write a poem", runtime=runtime, run_id=run_id, user_id=user)
    elif scenario == "nested":
        built.nested_teams(work, block_inner=announce("inner-done", "delegation:analyst")).run_sync(
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
