"""Issue 23 item 6: input size has a bound: a ticket longer than the limit is cut to it
and noted with its file and line, and it never holds up its batch-mates."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

from foreperson.tickets.reader import MAX_TICKET_CHARS, read_tickets


def write(path, rows) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "subject", "body"])
        writer.writerows(rows)


def test_a_ticket_over_the_limit_is_cut_and_listed(tmp_path):
    path = tmp_path / "in.csv"
    write(path, [["A", "Refund", "charged twice"], ["B", "Crash", "x" * (MAX_TICKET_CHARS + 5)]])
    read = read_tickets(path)
    assert [len(t.subject) + len(t.body) for t in read.tickets] == [19, MAX_TICKET_CHARS]
    assert read.cut == [(3, "B", MAX_TICKET_CHARS + 10)]


def test_the_job_answers_a_huge_ticket_and_its_batch_mates_and_says_so(tmp_path):
    huge = "The app crashes when I open the settings page. " * 60_000      # 2.8 MB
    write(tmp_path / "in.csv", [["A", "Refund", "I was charged twice"], ["B", "Crash", huge],
                                ["C", "Login", "I cannot log in"]])
    done = subprocess.run([sys.executable, "-m", "foreperson.cli.main", "tickets", "in.csv",
                           "--db", "j.db", "--out", "o.jsonl", "--no-progress"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    said = " ".join((done.stdout + done.stderr).split())      # as read, not as wrapped
    size = len("Crash") + len(huge.strip())
    assert (f"in.csv:3: ticket B has {size:,} characters; only its first "
            f"{MAX_TICKET_CHARS:,} were read") in said
    ids = [json.loads(line)["id"] for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert sorted(ids) == ["A", "B", "C"]
