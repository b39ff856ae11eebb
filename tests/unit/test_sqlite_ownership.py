"""Issue 21 item 5: foreperson never writes into a SQLite file that is not its own, and
the commands that read a job's tasks never create a schema."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys

import pytest

from foreperson.errors import ConfigurationError, StoreError
from foreperson.work import Task
from foreperson.work.stores.sqlite import SqliteStore


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def other_application(path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('ada')")
    conn.commit()
    conn.close()


def status(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "foreperson.cli.main", "status", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("create", [True, False])
def test_another_applications_database_is_refused_before_any_write(tmp_path, create):
    path = tmp_path / "crm.db"
    other_application(path)
    before = digest(path)
    with pytest.raises(ConfigurationError, match="is not a foreperson task database") as info:
        SqliteStore(path, create=create)
    assert "customers" in str(info.value)
    assert digest(path) == before                          # not a byte changed
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"   # not WAL
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["customers"]


def test_status_on_another_applications_database_changes_nothing(tmp_path):
    path = tmp_path / "crm.db"
    other_application(path)
    before = digest(path)
    done = status("--db", str(path))
    assert done.returncode == 2 and "is not a foreperson task database" in done.stderr
    assert "Traceback" not in done.stderr and digest(path) == before


def test_status_on_an_empty_file_creates_no_schema(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    done = status("--db", str(path))
    assert done.returncode == 2 and "holds no foreperson tasks" in done.stderr
    assert path.stat().st_size == 0


def test_a_foreperson_database_opens_for_reading_and_a_new_file_is_created(tmp_path):
    path = tmp_path / "jobs.db"
    with SqliteStore(path) as store:                       # a job creates it
        store.add([Task("work", {}, id="t1")])
    with SqliteStore(path, create=False) as store:          # a reader opens it
        assert store.get("t1") is not None


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def now(self) -> float:
        return self.t


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_database_deleted_or_replaced_under_the_store_stops_its_writes(tmp_path, how):
    path = tmp_path / "jobs.db"
    clock = Clock()
    store = SqliteStore(path, clock=clock)
    store.add([Task("work", {}, id="t1")])
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"jobs.db{suffix}").unlink(missing_ok=True)
    if how == "replaced":
        SqliteStore(path).close()                      # another, empty database
    clock.t += 1.0                                     # the check runs once a second
    with pytest.raises(StoreError, match="was deleted or replaced while this process"):
        store.add([Task("work", {}, id="t2")])
    store.close()
