"""A durable agent run that counts, for the outage tests (server restart, full disk):
imported by them, loaded by ``foreperson runs resume --agent
durable_counting.py:counting_agent``, and run as a script.

The agent ``counter`` calls the side-effect tool ``count`` once per turn (``step0``,
``step1``, ...), each real call one line in ``$FP_WORKDIR/count.txt``, then answers
``all counted``. Each real model call is one line (``turnN``) in ``model.txt``. The
environment shapes the run:

* ``FP_STEPS``: tool calls before the answer (default 6);
* ``FP_PAUSE_AT``: before the model call of that turn, print ``paused`` and wait for the
  file ``$FP_WORKDIR/go`` (for at most 120 s; without ``FP_PAUSE_AT``, no pause);
* ``FP_BIG_AT`` / ``FP_BIG_BYTES``: that turn's tool call carries a note of that many
  bytes, so its model call's journal record is that large.

Usage as a script: python durable_counting.py STORE RUN_ID, where STORE is
``sqlite:PATH`` or ``postgres:DSN|SCHEMA``; prints ``done <answer>`` at the end. With
``FP_CUT_BATCH=1`` (PostgreSQL), the first journal write inside a batch after the gate
opened finds its connection terminated by the server (``pg_terminate_backend``): the
connection is lost in the middle of the batch's transaction.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from foreperson import Agent
from foreperson.agents import tool
from foreperson.models import ToolCall, ToolReturn
from foreperson.testing import FunctionModel


def _line(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def counting_agent() -> Agent:
    """The agent ``counter``, shaped by the environment (see the module docstring)."""
    work = Path(os.environ["FP_WORKDIR"])
    steps = int(os.environ.get("FP_STEPS", "6"))
    pause_at = int(os.environ.get("FP_PAUSE_AT", "-1"))
    big_at = int(os.environ.get("FP_BIG_AT", "-1"))
    big = int(os.environ.get("FP_BIG_BYTES", "0"))

    def count(who: str, note: str = "") -> str:
        """Count one unit of work.

        Args:
            who: the unit.
            note: anything said with it.
        """
        _line(work / "count.txt", who)
        return f"counted {who}"

    async def reply(messages: Any, params: Any) -> Any:
        turn = sum(1 for m in messages if isinstance(m, ToolReturn))
        if turn == pause_at:
            print("paused", flush=True)
            deadline = time.monotonic() + 120
            while not (work / "go").exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the test never opened the gate")
                await anyio.sleep(0.02)
        _line(work / "model.txt", f"turn{turn}")
        if turn < steps:
            note = "n" * big if turn == big_at else ""
            return ToolCall("count", {"who": f"step{turn}", "note": note})
        return "all counted"

    return Agent("Count.", model=FunctionModel(reply, name="counter"), name="counter",
                 tools=[tool(count, name="count")])


def lines(path: Path) -> list[str]:
    """The lines of ``path`` (none when it is missing)."""
    return path.read_text().split() if path.exists() else []


def cut_a_batch(store: Any, gate: Path) -> None:
    """Have the server terminate the connection of the first ``put_step`` made inside a
    batch once ``gate`` exists (see the module docstring)."""
    import psycopg

    put = store.put_step
    done: list[bool] = []

    def cut(step: Any) -> Any:
        conn = getattr(store._local, "conn", None)
        if conn is not None and not done and gate.exists():
            done.append(True)
            with psycopg.connect(store.dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        return put(step)

    store.put_step = cut


def main() -> None:
    from durable_agents import open_runtime

    spec, run_id = sys.argv[1:3]
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    runtime = open_runtime(spec)
    if os.environ.get("FP_CUT_BATCH") == "1":
        cut_a_batch(runtime.store, Path(os.environ["FP_WORKDIR"]) / "go")
    try:
        result = counting_agent().run_sync("count them", runtime=runtime, run_id=run_id)
    finally:
        runtime.close()
    print(f"done {result.text}", flush=True)


if __name__ == "__main__":
    main()
