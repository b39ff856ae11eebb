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


def test_the_ticket_jobs_summary_prints_markup_in_labels_and_ids_as_text(tmp_path):
    import csv

    with (tmp_path / "in.csv").open("w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["id", "subject", "body"])
        rows.writerows([[f"[/bold]{i}", "Refund [/red]", "charged twice \x1b[31m"]
                        for i in range(10)])
    with (tmp_path / "ex.csv").open("w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(["text", "label", "answer"])
        for i in range(12):
            rows.writerow([f"charged twice {i}", "[/bold]billing", "We refund you."])
            rows.writerow([f"the app crashes {i}", "tech[/x]", "Reinstall it."])
    done = subprocess.run([sys.executable, "-m", "foreperson.cli.main", "tickets", "in.csv",
                           "--examples", "ex.csv", "--db", "j.db", "--out", "o.jsonl",
                           "--no-progress"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert "[/bold]billing" in done.stdout and "Traceback" not in said
    assert "\x1b" not in said
