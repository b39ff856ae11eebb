"""A key that an upstream service echoes back in an error (issue 21 item 6) is planted in
a task's failure, a tool's failure and an agent run's failure; then every place a person
or a store could read it is searched: every byte of the SQLite files, `foreperson status`,
the page's JSON, and the log lines of a `foreperson worker` process."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from foreperson.agents import Agent, RunOptions, tool
from foreperson.agents.steps import JournaledSteps
from foreperson.cli._common import RedactingFormatter
from foreperson.cli.main import main
from foreperson.models import ToolCall
from foreperson.observe.server import snapshot
from foreperson.testing import ScriptedModel
from foreperson.work import SqliteStore, Status, Supervisor, Task, Worker

KEY = "sk-proj-PlantedKey0123456789abcdefXYZ"
ECHO = (f"HTTP 401 from the CRM: invalid api key {KEY}; request was "
        f"Authorization: Bearer {KEY} to https://svc:{KEY}@crm.example/v1?api_key={KEY}")


def fails_with_the_key(task: Task) -> None:
    raise PermissionError(ECHO)


def crm_lookup(customer: str) -> str:
    """Look a customer up.

    Args:
        customer: the customer's name.
    """
    raise ConnectionError(ECHO)


def every_byte(folder: Path) -> bytes:
    """The store's files: the database, its write-ahead log and shared memory."""
    return b"".join(p.read_bytes() for p in sorted(folder.glob("work.db*")))


def test_a_planted_key_reaches_no_store_no_page_and_no_terminal(tmp_path, capsys):
    db = tmp_path / "work.db"
    store = SqliteStore(db)
    sup = Supervisor(store)
    sup.register(Worker("crm", {"lookup"}, fn=fails_with_the_key))
    sup.add_tasks([Task("lookup", {"customer": "ada"}, id="t1", max_attempts=1)])
    sup.run_sync()
    dead = store.get("t1")
    assert dead.status is Status.DEAD
    assert "PermissionError: HTTP 401 from the CRM" in dead.error     # the error is kept

    # a tool that fails with it, and a run that fails with it, both journaled
    model = ScriptedModel([ToolCall("crm_lookup", {"customer": "ada"}),
                           PermissionError(ECHO)])
    agent = Agent("Look customers up.", model=model, name="desk", tools=[tool(crm_lookup)])
    with pytest.raises(PermissionError):
        anyio.run(lambda: agent.run("who is ada?", run_id="run-1",
                                    options=RunOptions(steps=JournaledSteps(store))))
    steps = store.list_steps("run-1")
    assert any("ConnectionError" in str(s.result) for s in steps)   # the tool error is kept
    store.close()

    assert KEY.encode() not in every_byte(tmp_path)
    assert b"PlantedKey" not in every_byte(tmp_path)

    capsys.readouterr()
    assert main(["status", "--db", str(db)]) == 0
    shown = capsys.readouterr()
    assert "PermissionError" in shown.out and "PlantedKey" not in shown.out + shown.err

    page = snapshot(SqliteStore(db))
    assert "PermissionError" in str(page) and "PlantedKey" not in str(page)


def test_log_lines_and_tracebacks_are_redacted():
    formatter = RedactingFormatter("%(levelname)s %(message)s")
    try:
        raise PermissionError(ECHO)
    except PermissionError:
        record = logging.LogRecord("foreperson.x", logging.ERROR, __file__, 1,
                                   "calling %s failed", (f"https://u:{KEY}@h/",),
                                   sys.exc_info())
    line = formatter.format(record)
    assert "PermissionError" in line and "Traceback" in line
    assert "PlantedKey" not in line


_APP = textwrap.dedent(f"""
    from foreperson.work import App
    app = App()
    @app.task("lookup")
    def boom(task):
        raise PermissionError("upstream echoed Bearer " + {KEY!r})
""")


def test_a_worker_process_logs_no_key(tmp_path):
    (tmp_path / "keyapp.py").write_text(_APP)
    db = tmp_path / "work.db"
    store = SqliteStore(db)
    store.add([Task("lookup", {}, id="t1", max_attempts=1)])
    worker = subprocess.Popen(
        [sys.executable, "-c", "from foreperson.cli.main import main; main()", "worker",
         "keyapp", "--db", str(db), "--log-level", "DEBUG"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while store.get("t1").status is not Status.DEAD and time.monotonic() < deadline:
            time.sleep(0.05)            # polling the store to a deadline
        assert store.get("t1").status is Status.DEAD
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    assert "PermissionError" in store.get("t1").error
    assert "PlantedKey" not in out + err
    store.close()
    assert KEY.encode() not in every_byte(tmp_path)
