"""Issue 21 item 6: what task data puts on a terminal is printed as text: rich markup in
an id, a kind or an error is shown as written, and control characters are escaped."""

from __future__ import annotations

import subprocess
import sys

from foreperson.errors import GiveUp
from foreperson.work import Supervisor, Task, Worker
from foreperson.work.stores.sqlite import SqliteStore


def test_status_prints_markup_and_escape_sequences_from_task_data_as_text(tmp_path):
    db = tmp_path / "jobs.db"

    def hostile(task: Task) -> None:
        raise GiveUp("bad [/bold] input \x1b[2J\x1b[31mred\x07 done")

    sup = Supervisor(SqliteStore(db))
    sup.register(Worker("w", {"k[/red]"}, fn=hostile))
    sup.add_tasks([Task("k[/red]", {}, id="t-[bold]1")])
    sup.run_sync()
    sup.store.close()
    done = subprocess.run([sys.executable, "-m", "foreperson.cli.main", "status", "--db",
                           str(db)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "\x1b" not in out and "\x07" not in out          # nothing reaches the terminal
    assert "t-[bold]1" in out and "k[/red]" in out           # markup shown as written
    assert "[/bold]" in out and "\\x1b[2J\\x1b[31mred\\x07" in out   # escaped, visible
