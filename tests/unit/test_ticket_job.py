"""The ticket job's run: batches, settings carried by the tasks, remote workers that fit."""

from __future__ import annotations

import anyio
import anyio.from_thread
import pytest

from foreperson.errors import ConfigurationError
from foreperson.tickets.job import TicketJob, local_workers, run_job
from foreperson.tickets.model import Example, TicketModel
from foreperson.tickets.reader import Ticket, TicketFile
from foreperson.work import MemoryStore, Status


def examples() -> list[Example]:
    out = []
    for i in range(8):
        out += [Example(f"my invoice {i} shows a wrong charge", "Billing",
                        "We are checking the charge on your invoice.", language="en"),
                Example(f"the parcel {i} was never delivered", "Shipping",
                        "We are asking the carrier where the parcel is.", language="en")]
    return out


@pytest.fixture(scope="module")
def job() -> TicketJob:
    return TicketJob(TicketModel(examples()))


def tickets(n: int) -> TicketFile:
    return TicketFile([Ticket(f"T{i}", "", f"my invoice {i} shows a wrong charge", i + 2)
                       for i in range(n)], path="in.csv")


def test_the_offline_model_runs_in_batches_on_one_worker(job, tmp_path):
    assert local_workers(job, 8) == 1 and local_workers(job, 0) == 0
    assert job.app().worker("w").batch_size == job.model.batch_size
    store = MemoryStore()
    report = anyio.run(lambda: run_job(tickets(150), store, tmp_path / "o.jsonl", workers=8,
                                       job=job))
    assert report.written == 150 and report.categories == {"Billing": 150}
    assert store.stats().counts[Status.COMPLETED] == 450


def test_each_task_carries_the_settings_and_a_changed_one_is_named(job, tmp_path):
    (task,) = [t for t in job.tasks(tickets(1).tickets[0]) if t.id.endswith("classify")]
    assert task.payload["settings"] == {"target_precision": 0.9, "min_confidence": None}
    store = MemoryStore()
    anyio.run(lambda: run_job(tickets(3), store, tmp_path / "o.jsonl", workers=1, job=job))
    stricter = TicketJob(job.model, target_precision=0.95)
    with pytest.raises(ConfigurationError, match="--target-precision was 0.9 .* is 0.95 now"):
        anyio.run(lambda: run_job(tickets(3), store, tmp_path / "o.jsonl", workers=1,
                                  job=stricter))


def test_with_remote_workers_only_the_job_says_when_nothing_takes_its_tasks(job, tmp_path):
    said: list[str] = []

    async def main() -> None:
        with anyio.move_on_after(30) as scope:
            def tell(line: str) -> None:          # called from a worker thread
                said.append(line)
                anyio.from_thread.run_sync(scope.cancel)

            await run_job(tickets(2), MemoryStore(), tmp_path / "o.jsonl", workers=0,
                          job=job, notice=tell, remote_hint="start them with: X=1 worker",
                          stalled_after_s=0.3)

    anyio.run(main)
    assert len(said) == 1
    assert said[0].startswith("no live worker has taken this job's tasks for")
    assert said[0].endswith("start them with: X=1 worker")


def _records(path) -> list[dict]:
    import json
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_security_legal_and_outage_flags_raise_the_priority_and_say_so(job, tmp_path):
    # issue 23, item 5: no priority column, a security flag: high, not "medium"
    file = TicketFile([Ticket("S1", "", "my invoice 1 shows a wrong charge, my account was "
                              "hacked", 2),
                       Ticket("P1", "", "my invoice 2 shows a wrong charge", 3)], path="in.csv")
    anyio.run(lambda: run_job(file, MemoryStore(), tmp_path / "o.jsonl", workers=1, job=job))
    by_id = {r["id"]: r for r in _records(tmp_path / "o.jsonl")}
    assert by_id["S1"]["priority"] == "high"
    assert "priority raised to high (security, was medium)" in by_id["S1"]["reason"]
    assert by_id["P1"]["priority"] == "medium" and "priority" not in by_id["P1"]["reason"]
    # configurable: no signal raises it
    quiet = TicketJob(job.model, raise_priority=())
    anyio.run(lambda: run_job(file, MemoryStore(), tmp_path / "q.jsonl", workers=1, job=quiet))
    assert {r["id"]: r["priority"] for r in _records(tmp_path / "q.jsonl")}["S1"] == "medium"


def test_the_signals_that_raise_priority_come_from_the_environment(job, monkeypatch):
    from foreperson.tickets.model import raised_priority
    from foreperson.tickets.tasks import RAISE_PRIORITY

    assert TicketJob(job.model).raise_priority == RAISE_PRIORITY == (
        "security", "legal", "outage")
    monkeypatch.setenv("FOREPERSON_TICKETS_RAISE_PRIORITY", "legal, angry customer")
    assert TicketJob(job.model).raise_priority == ("legal", "angry customer")
    monkeypatch.setenv("FOREPERSON_TICKETS_RAISE_PRIORITY", "none")
    assert TicketJob(job.model).raise_priority == ()
    monkeypatch.setenv("FOREPERSON_TICKETS_RAISE_PRIORITY", "lawsuit")
    with pytest.raises(ConfigurationError, match="lawsuit is not a triage signal"):
        TicketJob(job.model)
    assert raised_priority("low", ["legal (lawyer)", "outage (down)"], RAISE_PRIORITY) == (
        "high", "priority raised to high (legal and outage, was low)")
    assert raised_priority("high", ["legal (lawyer)"], RAISE_PRIORITY) == ("high", "")
    assert raised_priority("low", ["angry customer (rude)"], RAISE_PRIORITY) == ("low", "")


def test_a_remote_worker_reads_the_examples_columns_the_job_named(tmp_path, monkeypatch):
    import csv

    from foreperson.errors import InputError
    from foreperson.tickets.job import JobOptions, _remote_hint
    from foreperson.tickets.model import load_examples

    path = tmp_path / "labelled.csv"     # columns no detector knows
    with path.open("w", newline="", encoding="utf-8") as out:
        rows = csv.writer(out)
        rows.writerow(["Beschreibung", "Abteilung", "Antwort des Teams"])
        for e in examples():
            rows.writerow([e.text, e.category, e.answer])
    named = {"text_column": "Beschreibung", "label_column": "Abteilung",
             "answer_column": "Antwort des Teams"}
    theirs = TicketJob(TicketModel(load_examples(path, **named)))  # what the job runs
    monkeypatch.setenv("FOREPERSON_TICKETS_EXAMPLES", str(path))
    with pytest.raises(InputError):             # without the columns: not readable
        TicketJob.from_environment()
    hint = _remote_hint(JobOptions(tmp_path / "in.csv", examples=path,
                                   **{f"examples_{k}": v for k, v in named.items()}))
    assert "FOREPERSON_TICKETS_EXAMPLES_TEXT_COLUMN=Beschreibung" in hint
    assert "FOREPERSON_TICKETS_EXAMPLES_ANSWER_COLUMN='Antwort des Teams'" in hint
    monkeypatch.setenv("FOREPERSON_TICKETS_EXAMPLES_TEXT_COLUMN", "Beschreibung")
    monkeypatch.setenv("FOREPERSON_TICKETS_EXAMPLES_LABEL_COLUMN", "Abteilung")
    monkeypatch.setenv("FOREPERSON_TICKETS_EXAMPLES_ANSWER_COLUMN", "Antwort des Teams")
    mine = TicketJob.from_environment()
    assert mine.fingerprint == theirs.fingerprint      # so it claims the job's tasks
    assert mine.model.examples[0].answer == examples()[0].answer
