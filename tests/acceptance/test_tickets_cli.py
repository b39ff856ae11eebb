"""The ticket job as a user runs it: the CLI in a subprocess, killed and re-run."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from foreperson.tickets.job import default_names
from foreperson.tickets.language import LANGUAGES
from foreperson.tickets.model import bundled_examples
from foreperson.work import SqliteStore, Status

ROOT = Path(__file__).resolve().parents[2]


def foreperson(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "foreperson.cli.main", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def make_tickets(path: Path, n: int) -> list[str]:
    """n tickets built from the example texts, with multi-line quoted bodies."""
    examples = bundled_examples()
    ids = [f"T{i:05d}" for i in range(n)]
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["ticket_id", "subject", "body"])
        for i, ticket_id in enumerate(ids):
            example = examples[i % len(examples)]
            writer.writerow([ticket_id, f"Case {i}, please help",
                             f"{example.text}\n\n-- sent from ticket {i}, \"reply soon\""])
    return ids


def write_examples(path: Path, rows: list[tuple[str, str, str]], *,
                   answer_column: str = "answer") -> None:
    """A labelled examples CSV: text, label and the answer a draft copies."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["text", "label", answer_column])
        out.writerows(rows)


def read_results(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_ticket_job_writes_one_line_per_ticket(tmp_path):
    ids = make_tickets(tmp_path / "in.csv", 60)
    done = foreperson("tickets", "in.csv", "--workers", "4", "--db", "t.db", "--out",
                      "out.jsonl", "--no-progress", cwd=tmp_path)
    results = read_results(tmp_path / "out.jsonl")
    assert sorted(r["id"] for r in results) == ids
    assert set(results[0]) == {"id", "category", "confidence", "priority", "language",
                               "needs_human", "reason", "draft_reply", "attempts"}
    assert all(r["attempts"] == 1 and r["draft_reply"] for r in results)   # no retries
    assert all(0 <= r["confidence"] <= 1 and r["language"] in LANGUAGES for r in results)
    assert {r["category"] for r in results} <= {e.category for e in bundled_examples()}
    assert "60/60 tickets written" in done.stdout
    # re-running the finished job changes nothing
    foreperson("tickets", "in.csv", "--workers", "4", "--db", "t.db", "--out", "out.jsonl",
               "--no-progress", cwd=tmp_path)
    assert len(read_results(tmp_path / "out.jsonl")) == 60


def test_killed_job_resumes_and_writes_every_ticket_exactly_once(tmp_path):
    ids = make_tickets(tmp_path / "in.csv", 1500)
    out = tmp_path / "out.jsonl"
    args = [sys.executable, "-m", "foreperson.cli.main", "tickets", "in.csv", "--workers",
            "8", "--db", "t.db", "--out", "out.jsonl", "--no-progress"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (out.exists() and out.read_text().count("\n") >= 100):
        assert proc.poll() is None, "the job ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = out.read_text().count("\n")
    assert partial < 1500, "the job finished before the kill: nothing was tested"
    store = SqliteStore(tmp_path / "t.db")
    assert store.stats().unfinished > 0
    # a live `foreperson worker` process shares the file and holds a task of its own
    from foreperson.work import Task
    store.add([Task("other-app-kind", id="theirs")])
    (theirs,) = store.claim("otherhost:4242", {"other-app-kind"}, 1, start=True,
                            lease_s=3600)
    store.close()

    foreperson("tickets", "in.csv", "--workers", "8", "--db", "t.db", "--out", "out.jsonl",
               "--no-progress", cwd=tmp_path)
    counts = Counter(r["id"] for r in read_results(out))
    assert sorted(counts) == ids and set(counts.values()) == {1}
    store = SqliteStore(tmp_path / "t.db")
    assert store.stats().counts[Status.COMPLETED] == 4500
    alive = store.get("theirs")            # the restarted job took back only its own
    assert alive.status is Status.RUNNING and alive.lease_token == theirs.lease_token
    store.close()


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(("name", "content", "message"), [
    ("bad.csv", 'id,subject,body\n1,a,b\n2,"never closed,c\n', "bad.csv:3: malformed CSV"),
    ("deep.jsonl", '{"id": "a", "body": "hi"}\n{"id": "b", "body": ' + DEEP + "}\n",
     "deep.jsonl:2: JSON nested too deeply"),
    ("deep.json", '[{"id": "a", "body": ' + DEEP + "}]", "deep.json"),
], ids=["csv", "deep-jsonl", "deep-json"])
def test_malformed_input_stops_before_any_work(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    proc = foreperson("tickets", name, "--db", "t.db", "--out", "out.jsonl",
                      cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2
    assert not (tmp_path / "out.jsonl").exists() and not (tmp_path / "t.db").exists()


def test_rows_without_text_are_reported(tmp_path):
    (tmp_path / "in.csv").write_text("id,subject,body\n1,Refund,charged twice\n2,,\n")
    proc = foreperson("tickets", "in.csv", "--workers", "2", "--db", "t.db", "--out",
                      "o.jsonl", "--no-progress", cwd=tmp_path)
    assert "in.csv:3: skipped ticket 2: no subject or body text" in proc.stderr
    assert [r["id"] for r in read_results(tmp_path / "o.jsonl")] == ["1"]


def test_examples_file_sets_the_categories(tmp_path):
    labelled = tmp_path / "labelled.csv"
    with labelled.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["subject", "body", "queue", "answer"])
        for i in range(8):
            writer.writerow([f"Invoice {i}", "my invoice total is wrong", "Billing Desk",
                             "We corrected the invoice."])
            writer.writerow([f"Crash {i}", "the app crashes at start", "Tech Desk",
                             "Please update the app."])
    (tmp_path / "in.csv").write_text("id,body\na,my invoice is wrong\nb,app crashes\n")
    foreperson("tickets", "in.csv", "--workers", "2", "--examples", "labelled.csv",
               "--out", "o.jsonl", "--no-progress", cwd=tmp_path)
    results = {r["id"]: r for r in read_results(tmp_path / "o.jsonl")}
    assert results["a"]["category"] == "Billing Desk"
    assert results["b"]["category"] == "Tech Desk"
    # the example's answer, made a letter (greeting and closing of the language)
    assert results["b"]["draft_reply"] == ("Hello,\n\nPlease update the app.\n\n"
                                           "Kind regards,\nCustomer Support")
    db, _ = default_names(tmp_path / "in.csv")
    assert (tmp_path / db).exists()        # the default --db


def test_status_and_retry_commands(tmp_path):
    store = SqliteStore(tmp_path / "t.db")
    from foreperson.work import Task
    store.add([Task("k", id="a", max_attempts=1), Task("k", id="b", depends_on=["a"])])
    task = store.claim("w", {"k"}, 1)[0]
    store.fail("a", task.lease_token, "ValueError: bad", retry_at=None)
    store.park_blocked()
    store.close()
    status = json.loads(foreperson("status", "--db", "t.db", "--json", cwd=tmp_path).stdout)
    assert status["counts"]["dead"] == 2
    assert {d["id"] for d in status["dead"]} == {"a", "b"}
    assert "ValueError: bad" in foreperson("status", "--db", "t.db", cwd=tmp_path).stdout
    assert "2 task(s) back to pending" in foreperson("retry", "--db", "t.db", "a",
                                                     cwd=tmp_path).stdout
    status = json.loads(foreperson("status", "--db", "t.db", "--json", cwd=tmp_path).stdout)
    assert status["counts"]["pending"] == 2
    usage = foreperson("retry", "--db", "t.db", cwd=tmp_path, check=False)
    assert usage.returncode == 2 and "--all-dead" in usage.stderr
    missing = foreperson("status", "--db", "nope.db", cwd=tmp_path, check=False)
    assert missing.returncode == 2 and "no task database at nope.db" in missing.stderr


def test_status_tells_a_dead_holder_from_a_live_one(tmp_path):
    from foreperson.testing import ManualClock
    from foreperson.work import Task

    clock = ManualClock(start=time.time() - 600)       # claimed ten minutes ago
    store = SqliteStore(tmp_path / "t.db", clock=clock)
    store.add([Task("k", id="gone"), Task("k", id="alive")])
    store.claim("dead-proc", {"k"}, 1, start=True, lease_s=30)
    store.close()
    store = SqliteStore(tmp_path / "t.db")
    store.claim("live-proc", {"k"}, 1, start=True, lease_s=30)
    store.close()
    status = json.loads(foreperson("status", "--db", "t.db", "--json", cwd=tmp_path).stdout)
    assert status["workers_health"]["live-proc"] == "ok"
    assert status["workers_health"]["dead-proc"].startswith("stale: its leases expired")
    assert "presumed dead" in foreperson("status", "--db", "t.db", cwd=tmp_path).stdout


def test_the_readme_sample_runs(tmp_path):
    sample = ROOT / "examples" / "tickets_sample.csv"
    foreperson("tickets", str(sample), "--workers", "8", "--no-progress", cwd=tmp_path)
    _, out = default_names(sample)
    assert out.startswith("tickets_sample.") and out.endswith(".results.jsonl")
    results = read_results(tmp_path / out)
    assert len(results) == 25
    flagged = {r["id"]: r["reason"] for r in results if r["needs_human"]}
    assert "legal" in flagged["T-1016"] and "security" in flagged["T-1005"]


@pytest.mark.parametrize("args", [["--help"], ["tickets", "--help"]])
def test_help_teaches(tmp_path, args):
    text = foreperson(*args, cwd=tmp_path).stdout
    assert "tickets" in text


def test_a_changed_input_is_not_mixed_with_an_earlier_run(tmp_path):
    (tmp_path / "tickets.csv").write_text("subject,body\nRefund,charged twice\nCrash,app crashes\n")
    foreperson("tickets", "tickets.csv", "--workers", "2", "--no-progress", cwd=tmp_path)
    (tmp_path / "tickets.csv").write_text("subject,body\nHacked,someone hacked my account\n")
    again = foreperson("tickets", "tickets.csv", "--workers", "2", "--no-progress",
                       cwd=tmp_path, check=False)
    assert again.returncode == 2
    assert ("tickets.csv:2: ticket 1 is not the ticket with that id already processed"
            in again.stderr)
    labelled = tmp_path / "labels.csv"
    labelled.write_text("text,label\nrefund my money,money\napp crash,bugs\n")
    (tmp_path / "tickets.csv").write_text("subject,body\nRefund,charged twice\nCrash,app crashes\n")
    other = foreperson("tickets", "tickets.csv", "--examples", "labels.csv", "--no-progress",
                       cwd=tmp_path, check=False)
    assert other.returncode == 2 and "processed with other --examples" in other.stderr
    assert "fewer than 3 examples" not in other.stderr      # refused first, nothing else
    fresh = foreperson("tickets", "tickets.csv", "--examples", "labels.csv", "--no-progress",
                       "--db", "fresh.db", "--out", "fresh.jsonl", cwd=tmp_path)
    assert "2 label(s) have fewer than 3 examples" in fresh.stderr
    _, out = default_names(tmp_path / "tickets.csv")
    assert len(read_results(tmp_path / out)) == 2     # nothing lost
    # refused before training, however long training would take
    with labelled.open("a") as f:
        f.writelines(f"refund order {i} please,money\napp crash on screen {i},bugs\n"
                     for i in range(400))
    big = foreperson("tickets", "tickets.csv", "--examples", "labels.csv", "--no-progress",
                     cwd=tmp_path, check=False)
    assert big.returncode == 2 and "processed with other --examples" in big.stderr
    assert "training on" not in big.stderr
    changed = foreperson("tickets", "tickets.csv", "--target-precision", "0.8",
                         "--no-progress", cwd=tmp_path, check=False)
    assert changed.returncode == 2 and "--target-precision" in changed.stderr


def test_ctrl_c_says_how_to_continue(tmp_path):
    ids = make_tickets(tmp_path / "in.csv", 1500)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "foreperson.cli.main", "tickets", "in.csv",
                             "--workers", "4", "--db", "t.db", "--out", "out.jsonl",
                             "--no-progress"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out.exists() and out.read_text().count("\n") >= 50):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted" in err and "run the same command again" in err
    foreperson("tickets", "in.csv", "--workers", "4", "--db", "t.db", "--out", "out.jsonl",
               "--no-progress", cwd=tmp_path)
    counts = Counter(r["id"] for r in read_results(out))
    assert sorted(counts) == ids and set(counts.values()) == {1}


def test_usage_errors_are_one_clear_message(tmp_path):
    bad = foreperson("tickets", "x.csv", "--workers", "abc", cwd=tmp_path, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--workers" in bad.stderr
    huge = foreperson("tickets", "x.csv", "--workers", "100000", cwd=tmp_path, check=False)
    assert huge.returncode == 2 and "Traceback" not in huge.stderr
    assert foreperson("--version", cwd=tmp_path).stdout.startswith("foreperson ")
    out_dir = foreperson("tickets", str(ROOT / "examples" / "tickets_sample.csv"), "--out",
                         str(tmp_path), cwd=tmp_path, check=False)
    assert out_dir.returncode == 2 and "not a regular file" in out_dir.stderr


def test_the_job_ends_when_its_own_tickets_are_done(tmp_path):
    """Other work in the same database (another app's tasks) does not keep it running."""
    from foreperson.work import Task
    store = SqliteStore(tmp_path / "shared.db")
    store.add([Task("someone_elses_kind", id="other-app-task")])
    store.close()
    (tmp_path / "in.csv").write_text("id,body\n1,please refund\n2,app crashes\n")
    done = foreperson("tickets", "in.csv", "--workers", "2", "--db", "shared.db", "--out",
                      "o.jsonl", "--no-progress", cwd=tmp_path)
    assert "2/2 tickets written" in done.stdout
    store = SqliteStore(tmp_path / "shared.db")
    assert store.get("other-app-task").status is Status.PENDING
    store.close()


def _nightly(path: Path, numbers: range) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "subject", "body"])
        for i in numbers:
            writer.writerow([f"N-{i}", f"s{i}", f"please refund invoice {i}"])


def test_two_nightly_files_of_one_name_never_share_results(tmp_path):
    _nightly(tmp_path / "day1" / "tickets.csv", range(1, 21))
    _nightly(tmp_path / "day2" / "tickets.csv", range(11, 31))   # 10 of day 1's again
    first = foreperson("tickets", "day1/tickets.csv", "--workers", "2", "--no-progress",
                       cwd=tmp_path)
    second = foreperson("tickets", "day2/tickets.csv", "--workers", "2", "--no-progress",
                        cwd=tmp_path)
    outs = [default_names(tmp_path / d / "tickets.csv")[1] for d in ("day1", "day2")]
    assert outs[0] != outs[1]
    assert sorted(r["id"] for r in read_results(tmp_path / outs[1])) == sorted(
        f"N-{i}" for i in range(11, 31))
    assert "20/20 tickets written" in first.stdout and "20/20 tickets written" in second.stdout
    again = foreperson("tickets", "day2/tickets.csv", "--workers", "2", "--no-progress",
                       cwd=tmp_path)
    # finished: said at once, nothing retrained, nothing written
    assert "nothing to do: all 20 tickets of day2/tickets.csv are already in" in again.stderr
    assert "training" not in again.stderr
    assert len(read_results(tmp_path / outs[1])) == 20
    # one --db for two inputs: refused, saying what to do
    mixed = foreperson("tickets", "day1/tickets.csv", "--db", default_names(
        tmp_path / "day2" / "tickets.csv")[0], "--out", "x.jsonl", "--no-progress",
        cwd=tmp_path, check=False)
    assert mixed.returncode == 2
    assert "holds 10 ticket(s) that are not in day1/tickets.csv" in mixed.stderr
    assert "its own --db and --out" in mixed.stderr
    # a month later, the earlier night's task database goes; its results stay
    day1_db = tmp_path / default_names(tmp_path / "day1" / "tickets.csv")[0]
    with sqlite3.connect(day1_db) as conn:
        conn.execute("UPDATE tasks SET created_at = created_at - 40 * 86400, "
                     "finished_at = finished_at - 40 * 86400")
    later = foreperson("tickets", "day2/tickets.csv", "--prune-older-than", "30d",
                       "--no-progress", cwd=tmp_path)
    assert f"deleted the task database of an earlier run: {day1_db}" in later.stdout
    assert "(60 tasks, the last finished 40.0 days ago)" in later.stdout
    assert not day1_db.exists() and (tmp_path / outs[0]).exists()
    assert (tmp_path / default_names(tmp_path / "day2" / "tickets.csv")[0]).exists()


def test_repeated_rows_are_processed_once_and_conflicts_named_together(tmp_path):
    rows = [["id", "subject", "body"]] + [[f"T-{i}", "", f"please refund invoice {i}"]
                                          for i in range(1, 11)]
    with (tmp_path / "dup.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows + [rows[7], rows[3]])
    done = foreperson("tickets", "dup.csv", "--workers", "2", "--out", "o.jsonl",
                      "--no-progress", cwd=tmp_path)
    assert "dup.csv:12: skipped ticket T-7: repeats line 8" in done.stderr
    assert len(read_results(tmp_path / "o.jsonl")) == 10
    with (tmp_path / "bad.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows + [["T-7", "", "other"], ["T-3", "", "other"]])
    bad = foreperson("tickets", "bad.csv", cwd=tmp_path, check=False)
    assert bad.returncode == 2 and "2 ticket id(s) are used by rows with different text" in (
        bad.stderr)


@pytest.mark.parametrize(("args", "message"), [
    (["--workers", "0"], "--workers 0 only makes sense with --dsn"),
    (["--schema", "x"], "--schema goes with --dsn"),
    (["--db", "a.db", "--dsn", "postgresql://nobody@127.0.0.1:1/x"], "not both"),
    (["--db", "same.jsonl", "--out", "same.jsonl"], "--db and --out are the same file"),
    (["--out", "/proc/res.jsonl"], "--out /proc/res.jsonl: cannot"),
    (["--db", "/proc/x/t.db"], "--db /proc/x/t.db: cannot"),
    (["--examples", "missing.csv"], "--examples missing.csv: no such file"),
    (["--base-url", "http://127.0.0.1:1"], "--base-url goes with --model"),
    (["--raise-priority", "security,lawsuit"], "--raise-priority: lawsuit is not a triage "
                                                "signal"),
])
def test_usage_errors_come_before_any_training(tmp_path, args, message):
    sample = str(ROOT / "examples" / "tickets_sample.csv")
    began = time.monotonic()
    proc = foreperson("tickets", sample, *args, cwd=tmp_path, check=False)
    took = time.monotonic() - began
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1                     # one line
    assert "training" not in proc.stderr and took < 4.0     # training alone takes longer
    assert not list(tmp_path.glob("*.db")) and not list(tmp_path.glob("*.jsonl"))


def test_standard_input_and_pipes_are_named(tmp_path):
    stdin = foreperson("tickets", "-", cwd=tmp_path, check=False)
    assert stdin.returncode == 2 and "standard input is not supported" in stdin.stderr
    (tmp_path / "pipe.csv").write_text('id|subject|body\n1|"Refund"|"twice"\n')
    pipe = foreperson("tickets", "pipe.csv", cwd=tmp_path, check=False)
    assert pipe.returncode == 2 and "is the separator '|'?" in pipe.stderr


def test_a_rerun_with_one_setting_changed_names_it(tmp_path):
    (tmp_path / "in.csv").write_text("id,body\n1,please refund\n2,app crashes\n")
    foreperson("tickets", "in.csv", "--workers", "2", "--no-progress", cwd=tmp_path)
    changed = foreperson("tickets", "in.csv", "--target-precision", "0.8", "--no-progress",
                         cwd=tmp_path, check=False)
    assert changed.returncode == 2
    assert "--target-precision was 0.9 in the earlier run" in changed.stderr
    fixed = foreperson("tickets", "in.csv", "--min-confidence", "0.3", "--no-progress",
                       cwd=tmp_path, check=False)
    assert fixed.returncode == 2 and "--min-confidence was not given" in fixed.stderr


def test_evaluate_prints_scores_against_baselines(tmp_path):
    with (tmp_path / "labelled.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["body", "queue"])
        for i in range(15):
            writer.writerow([f"my invoice {i} shows a wrong charge", "Billing"])
            writer.writerow([f"the parcel {i} was never delivered", "Shipping"])
    proc = foreperson("tickets", "--evaluate", "--examples", "labelled.csv", cwd=tmp_path)
    assert "foreperson" in proc.stdout and "baseline: majority class" in proc.stdout
    assert "Billing" in proc.stdout and "confidence threshold" in proc.stdout
    first = next(line for line in proc.stdout.splitlines() if line.startswith("foreperson "))
    assert first.split()[1:] == ["1.000", "1.000"]
    assert ("to run the job with this model: foreperson tickets TICKETS.csv --examples "
            "labelled.csv") in proc.stdout
    missing = foreperson("tickets", "--evaluate", cwd=tmp_path, check=False)
    assert missing.returncode == 2 and "--evaluate needs --examples" in missing.stderr
    (tmp_path / "tickets.csv").write_text("body\nhello\n")
    ignored = foreperson("tickets", "tickets.csv", "--evaluate", "--examples", "labelled.csv",
                         cwd=tmp_path, check=False)
    assert ignored.returncode == 2 and "does not read tickets.csv" in ignored.stderr


def test_the_summary_says_the_bundled_model_is_a_demo(tmp_path):
    (tmp_path / "in.csv").write_text("id,body\n1,please refund\n")
    done = foreperson("tickets", "in.csv", "--workers", "2", "--no-progress", cwd=tmp_path)
    assert "demo set" in done.stdout and "--examples" in done.stdout


def test_the_demo_models_summary_says_in_one_line_why_and_what_to_do(tmp_path):
    # issue 23, item 2: every ticket flagged; one line says why, what its scores mean
    # beside "right N % of the time", and what --examples / --min-confidence would do
    sample = ROOT / "examples" / "tickets_sample.csv"
    done = foreperson("tickets", str(sample), "--no-progress", cwd=tmp_path)
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("every ticket went to")]
    assert "demo set" in line and "of the time on examples it had not trained on" in line
    assert "are not chances of being right" in line and "--examples FILE" in line
    assert re.search(r"--min-confidence 0\.\d\d lets \d+ of these 25 tickets through", line)
    _, out = default_names(sample)
    reasons = [r["reason"] for r in read_results(tmp_path / out)]
    assert all("whatever its score" in r for r in reasons)


def test_a_run_refused_before_any_work_leaves_no_task_database(tmp_path):
    (tmp_path / "tickets.csv").write_text("subject,body\nRefund,charged twice\n")
    (tmp_path / "notes.jsonl").write_text("my own notes, not results\n")
    refused = foreperson("tickets", "tickets.csv", "--db", "t.db", "--out", "notes.jsonl",
                         "--no-progress", cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "not a foreperson results file" in refused.stderr
    assert not list(tmp_path.glob("t.db*"))
    assert (tmp_path / "notes.jsonl").read_text() == "my own notes, not results\n"


def test_raise_priority_chooses_the_signals_and_the_summary_counts_the_raised(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("id,subject,body\n"
                    "S1,Account,someone logged into my account from another country and "
                    "changed my password\n"
                    "L1,Invoice,my invoice shows a charge I did not make; my lawyer will "
                    "sue you\n"
                    "P1,Invoice,my invoice shows the wrong address\n")
    raised = foreperson("tickets", "in.csv", "--out", "a.jsonl", "--db", "a.db",
                        "--no-progress", cwd=tmp_path)
    by_id = {r["id"]: r for r in read_results(tmp_path / "a.jsonl")}
    assert by_id["S1"]["priority"] == "high" and by_id["L1"]["priority"] == "high"
    line = next(x for x in raised.stdout.splitlines() if x.startswith("priority:"))
    assert "(2 raised to high by triage: security, legal, outage)" in line
    quiet = foreperson("tickets", "in.csv", "--out", "b.jsonl", "--db", "b.db",
                       "--raise-priority", "none", "--no-progress", cwd=tmp_path)
    assert "raised to high" not in quiet.stdout
    assert not any("priority raised" in r["reason"] for r in read_results(tmp_path / "b.jsonl"))


def test_the_examples_answer_column_is_named_on_the_command_line(tmp_path):
    rows = [("my invoice shows a wrong charge", "Billing",
             "We corrected the charge on your invoice.")] * 4
    rows += [("the parcel was never delivered", "Shipping",
              "We asked the carrier where your parcel is.")] * 4
    write_examples(tmp_path / "ex.csv", rows, answer_column="agent_reply")
    (tmp_path / "in.csv").write_text("id,subject,body\nA1,Invoice,my invoice shows a wrong "
                                     "charge\n")
    foreperson("tickets", "in.csv", "--examples", "ex.csv", "--examples-answer-column",
               "agent_reply", "--out", "o.jsonl", "--db", "t.db", "--no-progress",
               cwd=tmp_path)
    [result] = read_results(tmp_path / "o.jsonl")
    assert "We corrected the charge on your invoice." in result["draft_reply"]
    wrong = foreperson("tickets", "in.csv", "--examples", "ex.csv", "--examples-answer-column",
                       "nope", "--out", "p.jsonl", "--db", "p.db", cwd=tmp_path, check=False)
    assert wrong.returncode == 2 and "nope" in wrong.stderr and "Traceback" not in wrong.stderr
    helped = subprocess.run([sys.executable, "-m", "foreperson.cli.main", "tickets", "--help"],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "COLUMNS": "80"})
    lines = helped.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "--examples-answer-column" in helped.stdout and "…" not in helped.stdout
    assert "answer / reply / response / draft_reply" in " ".join(" ".join(lines).split())


def test_a_never_send_file_flags_the_drafts_that_say_a_listed_phrase(tmp_path):
    rows = [("my laptop battery drains fast", "Hardware",
             "Please reset the  smc, then charge it fully.")] * 4
    rows += [("the parcel was never delivered", "Shipping",
              "We asked the carrier where your parcel is.")] * 4
    write_examples(tmp_path / "ex.csv", rows)
    (tmp_path / "in.csv").write_text("id,subject,body\nA1,Battery,my laptop battery drains "
                                     "fast\nA2,Parcel,the parcel was never delivered\n")
    (tmp_path / "never.txt").write_text("# wrong in our own answers\n\nReset the SMC\nPRAM\n")
    common = ("--examples", "ex.csv", "--min-confidence", "0", "--no-progress")
    foreperson("tickets", "in.csv", *common, "--out", "plain.jsonl", "--db", "plain.db",
               cwd=tmp_path)
    plain = {r["id"]: r for r in read_results(tmp_path / "plain.jsonl")}
    assert "reset the  smc" in plain["A1"]["draft_reply"]     # copied, not flagged
    assert not plain["A1"]["needs_human"] and not plain["A2"]["needs_human"]
    foreperson("tickets", "in.csv", *common, "--never-send", "never.txt", "--out", "o.jsonl",
               "--db", "t.db", cwd=tmp_path)
    results = {r["id"]: r for r in read_results(tmp_path / "o.jsonl")}
    assert results["A1"]["needs_human"]
    assert "never to send: 'Reset the SMC' (never.txt:3)" in results["A1"]["reason"]
    assert not results["A2"]["needs_human"]     # whole phrases only: nothing else flagged
    # the list is one of the run's settings: the same phrases (another file, another
    # order) continue the run; changed ones under the same database are named
    (tmp_path / "copy.txt").write_text("pram\nreset the smc\n")
    again = foreperson("tickets", "in.csv", *common, "--never-send", "copy.txt", "--out",
                       "o.jsonl", "--db", "t.db", cwd=tmp_path)
    assert "already in o.jsonl" in again.stdout + again.stderr
    (tmp_path / "never.txt").write_text("SMC\nPRAM\n")
    changed = foreperson("tickets", "in.csv", *common, "--never-send", "never.txt", "--out",
                         "o.jsonl", "--db", "t.db", cwd=tmp_path, check=False)
    assert changed.returncode == 2
    assert "changed since the earlier run: it adds 'SMC' and drops 'Reset the SMC'" in \
        changed.stderr
    (tmp_path / "bad.txt").write_text("SMC\nx\n")
    bad = foreperson("tickets", "in.csv", *common, "--never-send", "bad.txt", "--out",
                     "b.jsonl", "--db", "b.db", cwd=tmp_path, check=False)
    assert bad.returncode == 2 and "bad.txt:2" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "b.db").exists()
    evaluate = foreperson("tickets", "--evaluate", "--examples", "ex.csv", "--never-send",
                          "never.txt", cwd=tmp_path, check=False)
    assert evaluate.returncode == 2 and "leave out --never-send" in evaluate.stderr
