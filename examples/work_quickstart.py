"""The work layer on its own: durable tasks on SQLite, dependencies, a flaky step that
is retried with backoff, a bad payload parked DEAD with its dependents, and a lock that
keeps two writers of one file apart.

    python examples/work_quickstart.py [DB]     (default: a fresh file in a temp folder)
"""

from __future__ import annotations

import os
import sys
import tempfile

from foreperson import GiveUp, SqliteStore, Status, Supervisor, Task, Worker, current_task


def fetch(task: Task) -> dict:
    if task.payload["customer"] == "ada" and task.attempts == 1:
        raise TimeoutError("the CRM took too long")      # retryable: tried again
    return {"customer": task.payload["customer"], "tier": "gold"}


def score(task: Task) -> dict:
    (fetched,) = current_task().dependency_results().values()
    if fetched["customer"].startswith("?"):
        raise GiveUp("unknown customer id")               # not retryable: DEAD now
    return {"customer": fetched["customer"], "score": len(fetched["customer"]) * 10}


def report(task: Task) -> dict:
    scores = current_task().dependency_results().values()
    return {"total": sum(s["score"] for s in scores)}


def main() -> None:
    db = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "quick.db")
    sup = Supervisor(SqliteStore(db), backoff_base_s=0.05)
    sup.register(Worker("crm", {"fetch"}, fn=fetch, concurrency=2))
    sup.register(Worker("scorer", {"score"}, fn=score, concurrency=2))
    sup.register(Worker("reporter", {"report"}, fn=report))

    tasks = []
    for customer in ("ada", "grace", "?x"):
        fetched = Task("fetch", {"customer": customer}, id=f"fetch/{customer}")
        scored = Task("score", {}, id=f"score/{customer}", depends_on=[fetched.id],
                      locks=["scores.csv"])
        tasks += [fetched, scored]
    tasks.append(Task("report", {}, id="report/ok", depends_on=["score/ada", "score/grace"]))
    tasks.append(Task("report", {}, id="report/all",
                      depends_on=["score/ada", "score/grace", "score/?x"]))
    sup.add_tasks(tasks)

    result = sup.run_sync()
    for task in sup.store.list_tasks():
        shown = task.result if task.status is Status.COMPLETED else task.error
        print(f"{task.id:<12} {task.status.value:<9} attempts={task.attempts} {shown}")
    print(f"retries={result.retries} parked={result.parked} "
          f"counts={ {s.value: n for s, n in result.stats.counts.items() if n} }")


if __name__ == "__main__":
    main()
