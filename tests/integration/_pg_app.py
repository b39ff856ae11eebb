"""The App that ``foreperson worker`` runs in the PostgreSQL process tests.

Each task appends lines to the file named by ``FP_TEST_LOG`` (one ``os.write`` per line
with O_APPEND, so lines from many processes never interleave):

``start <task> <lease token> <pid>``    the function began
``effect <task> <lease token> <pid> <key>``   the side effect was done (after ``once()``,
                                        with its idempotency key)
"""

from __future__ import annotations

import os
import signal
import time

from foreperson.work import App, Task, current_task

app = App()


def _line(*words: object) -> None:
    fd = os.open(os.environ["FP_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (" ".join(map(str, words)) + "\n").encode())
    finally:
        os.close(fd)


def _effect(task: Task) -> None:
    """The side effect that must happen at least once per task, with its key: claimed,
    done, then recorded done."""
    ctx = current_task()
    if ctx.once("send"):
        _line("effect", task.id, task.lease_token, os.getpid(), ctx.effect_key("send"))
        ctx.done("send")


@app.task("work")
def work(task: Task) -> dict:
    """Sleep ``ms`` milliseconds, then do the side effect once."""
    _line("start", task.id, task.lease_token, os.getpid())
    time.sleep(task.payload.get("ms", 10) / 1000)
    _effect(task)
    return {"by": os.getpid()}


@app.task("slow")
def slow(task: Task) -> dict:
    """Sleep ``s`` seconds, then do the side effect once."""
    _line("start", task.id, task.lease_token, os.getpid())
    time.sleep(task.payload.get("s", 1.0))
    _effect(task)
    return {"by": os.getpid()}


@app.task("poison")
def poison(task: Task) -> None:
    """Kill the worker process that runs it, every time."""
    _line("start", task.id, task.lease_token, os.getpid())
    os.kill(os.getpid(), signal.SIGKILL)
