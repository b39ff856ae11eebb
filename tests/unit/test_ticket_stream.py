"""Big inputs stay flat (issue 21 item 7): a file is checked whole, then read again a
chunk at a time while the workers run; results are written as tickets finish, so the
first lines are out before the input has been read to its end."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from foreperson.errors import ConfigurationError, InputError
from foreperson.tickets import runner
from foreperson.tickets.job import TicketJob, run_job
from foreperson.tickets.model import Example, TicketModel
from foreperson.tickets.reader import TicketStream, scan_tickets
from foreperson.work import MemoryStore


def write_csv(path: Path, n: int) -> Path:
    lines = ["id,subject,body"] + [f"T{i},Invoice {i},my invoice {i} shows a wrong charge"
                                   for i in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def job() -> TicketJob:
    examples = [Example(f"my invoice {i} shows a wrong charge", "Billing",
                        "We are checking the charge on your invoice.", language="en")
                for i in range(6)]
    examples += [Example(f"the parcel {i} was never delivered", "Shipping",
                         "We are asking the carrier where the parcel is.", language="en")
                 for i in range(6)]
    return TicketJob(TicketModel(examples))


def test_a_stream_holds_no_ticket_and_reads_the_file_again(tmp_path):
    path = write_csv(tmp_path / "in.csv", 25)
    stream = scan_tickets(path)
    assert stream.count == 25 and stream.has_id("T24") and not stream.has_id("T25")
    assert not any(isinstance(v, list) and len(v) >= 25 for v in vars(stream).values())
    assert [len(c) for c in stream.chunks(10)] == [10, 10, 5]
    assert [t.id for t in stream][:3] == ["T0", "T1", "T2"]
    path.write_text(path.read_text() + "T99,x,y\n")           # changed under the job
    with pytest.raises(InputError, match="changed while the job was reading it"):
        list(stream)


def test_the_first_results_are_written_before_the_input_is_read_to_its_end(
        job, tmp_path, monkeypatch):
    out = tmp_path / "o.jsonl"
    stream = scan_tickets(write_csv(tmp_path / "in.csv", 120))
    written_when_read: list[int] = []
    chunks = TicketStream.chunks

    def watched(self, size):
        for chunk in chunks(self, size):
            if size == runner.CHUNK_TICKETS:       # the job's reading (not the rerun check)
                written_when_read.append(len(out.read_text().splitlines())
                                         if out.exists() else 0)
            yield chunk

    monkeypatch.setattr(TicketStream, "chunks", watched)
    monkeypatch.setattr(runner, "CHUNK_TICKETS", 10)
    monkeypatch.setattr(runner, "WINDOW_TICKETS", 20)
    monkeypatch.setattr(runner, "FLUSH_TICKETS", 5)
    report = anyio.run(lambda: run_job(stream, MemoryStore(), out, workers=1, job=job))
    assert report.written == 120
    assert len(written_when_read) == 12
    assert written_when_read[-1] >= 90   # at most the window is unwritten when a chunk is taken
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(f"T{i}" for i in range(120))


def test_a_jsonl_line_nested_too_deeply_is_named_and_not_a_traceback(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"id": "a", "body": "hello"}\n'
                    '{"id": "b", "body": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    with pytest.raises(InputError, match=r"deep\.jsonl:2: JSON nested too deeply"):
        scan_tickets(path)


@pytest.mark.parametrize(("name", "content", "message"), [
    ("empty.csv", "", "empty.csv: the file is empty"),
    ("empty.json", "", "empty.json: the file is empty"),
    ("empty.jsonl", "\n\n", "empty.jsonl: the file is empty"),
    ("header.csv", "id,subject,body\n", r"header.csv: no tickets \(only a header row\)"),
    ("list.json", "[]", r"list.json: no tickets \(an empty list\)"),
    ("blank.csv", "id,subject,body\nA1,,\n",
     r"blank.csv: no tickets with text \(its 1 row\(s\) were skipped"),
])
def test_every_kind_of_empty_input_gets_one_kind_of_message(tmp_path, name, content, message):
    from foreperson.tickets.job import JobListener, JobOptions, run_tickets

    (tmp_path / name).write_text(content)
    with pytest.raises(ConfigurationError, match=message):
        run_tickets(JobOptions(tmp_path / name, db=str(tmp_path / "t.db"),
                               out=tmp_path / "o.jsonl"), JobListener())
    assert not (tmp_path / "t.db").exists()          # refused before any work


def test_nul_bytes_are_removed_and_reported_with_their_line(tmp_path):
    from foreperson.tickets.job import JobListener, JobOptions, run_tickets

    path = tmp_path / "nul.csv"
    path.write_text("id,subject,body\nA1,Hi,hello\x00 there\x00\nA2,Hi,clean text\n")
    stream = scan_tickets(path)
    assert stream.nul == [(2, "A1", 2)]
    assert [t.body for t in stream] == ["hello there", "clean text"]
    notes: list[str] = []
    run_tickets(JobOptions(path, db=str(tmp_path / "t.db"), out=tmp_path / "o.jsonl",
                           workers=1), JobListener(note=notes.append))
    assert "nul.csv:2: ticket A1: 2 NUL bytes removed from its text" in " ".join(notes)
    assert "\x00" not in (tmp_path / "o.jsonl").read_text()
