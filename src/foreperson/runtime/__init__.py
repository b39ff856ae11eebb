"""Durable runtimes (layer 6, seed 001): where agent runs meet the work layer's stores.

``InMemoryRuntime()``, ``SqliteRuntime(path)``, ``PostgresRuntime(dsn)``: every model
call, tool call, approval, spawn and delegation of a run, at every level of nesting, is
a journaled step under a deterministic key (run id + step path); running again with the
same run id, or ``agent.resume(run_id, runtime=...)``, returns each finished step's
result without calling the model or the tool again and executes only the unfinished
ones. A run belongs to its user (tenant pinning); a tool call can wait for a human
across processes; a team's workers can run under ``foreperson worker`` elsewhere.

Example::

    from foreperson import Agent
    from foreperson.runtime import SqliteRuntime
    from foreperson.testing import ScriptedModel

    runtime = SqliteRuntime("runs.db")
    agent = Agent("Greet the user.", model=ScriptedModel(["Hello, Ada."]), name="greeter")
    first = agent.run_sync("I am Ada.", runtime=runtime, run_id="run-1", user_id="ada")
    again = agent.resume_sync("run-1", runtime=runtime, user_id="ada")   # replayed
    assert again.output == first.output
"""

from ._runtime import InMemoryRuntime, PostgresRuntime, Runtime, SqliteRuntime
from ._tree import outline_run, render_run
from ._workers import agent_app

__all__ = [
    "InMemoryRuntime",
    "PostgresRuntime",
    "Runtime",
    "SqliteRuntime",
    "agent_app",
    "outline_run",
    "render_run",
]
