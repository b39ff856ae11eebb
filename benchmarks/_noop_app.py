"""A task function that does nothing, for benchmarks that start ``foreperson worker``
processes (``foreperson worker _noop_app`` from this folder)."""

from foreperson.work import App, Task

app = App()


@app.task("w1")
async def noop(task: Task) -> None:
    """W1's task: no work at all, so only the claim and the completion are timed."""
    return None
