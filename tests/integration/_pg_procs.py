"""Helpers for the PostgreSQL process tests: start ``foreperson worker`` subprocesses,
wait on database conditions with a deadline, read the task log, cause outages."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

HERE = Path(__file__).resolve().parent


def wait_until(predicate: Callable[[], object], *, timeout: float, what: str,
               every: float = 0.05) -> object:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


@dataclass
class WorkerProc:
    """One ``foreperson worker`` subprocess."""

    proc: subprocess.Popen
    stderr_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def name(self) -> str:
        import socket
        return f"{socket.gethostname()}:{self.proc.pid}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, timeout: float = 20.0, *, signal_first: bool = True) -> int:
        """SIGTERM (unless already sent) and wait; SIGKILL if it does not exit."""
        if signal_first and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)


@dataclass
class Cluster:
    """Worker processes sharing one schema, and the log their tasks write."""

    dsn: str
    schema: str
    tmp: Path
    workers: list[WorkerProc] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)

    @property
    def log(self) -> Path:
        return self.tmp / "tasks.log"

    def start(self, *, kinds: str | None = None, concurrency: int = 4,
              stale_after: float = 2.0, grace: float = 5.0, prefetch: int = 1) -> WorkerProc:
        n = len(self.workers)
        cmd = [sys.executable, "-m", "foreperson.cli.main", "worker", "_pg_app:app",
               "--dsn", self.dsn, "--schema", self.schema, "--concurrency", str(concurrency),
               "--stale-after", str(stale_after), "--grace", str(grace),
               "--prefetch", str(prefetch)]
        if kinds:
            cmd += ["--kinds", kinds]
        env = {**os.environ, "FP_TEST_LOG": str(self.log),
               "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
        stderr_path = self.tmp / f"worker{n}.stderr"
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                    cwd=self.tmp)
        worker = WorkerProc(proc, stderr_path)
        self.workers.append(worker)
        return worker

    def kill(self, worker: WorkerProc) -> None:
        """SIGKILL, as a crash would."""
        worker.kill(signal.SIGKILL)
        worker.proc.wait(10)
        self.killed.add(worker.pid)

    def stop_all(self) -> None:
        for worker in self.workers:       # all at once, then wait for each
            if worker.proc.poll() is None:
                worker.kill(signal.SIGTERM)
        for worker in self.workers:
            worker.stop(signal_first=False)

    def lines(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [line.split() for line in self.log.read_text().splitlines() if line]


class Db:
    """An autocommit connection with the test schema on its search path."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.dsn = dsn
        self.schema = schema
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute("SELECT set_config('search_path', quote_ident(%s), false)", (schema,))

    def close(self) -> None:
        self.conn.close()

    def value(self, query: str, params: tuple = ()) -> object:
        row = self.conn.execute(query, params).fetchone()
        return None if row is None else row[0]

    def rows(self, query: str, params: tuple = ()) -> list[tuple]:
        return self.conn.execute(query, params).fetchall()

    def counts(self) -> dict[str, int]:
        return dict(self.rows("SELECT status, count(*) FROM tasks GROUP BY status"))

    def completed(self) -> int:
        return int(self.value("SELECT count(*) FROM tasks WHERE status = 'completed'"))

    def record_completions(self) -> None:
        """Log every transition to COMPLETED (a task completed twice shows up twice)."""
        self.conn.execute("CREATE TABLE completions (task_id text NOT NULL, "
                          "at timestamptz NOT NULL DEFAULT clock_timestamp())")
        self.conn.execute("""
            CREATE FUNCTION record_completion() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO completions (task_id) VALUES (NEW.id);
                RETURN NULL;
            END $$""")
        self.conn.execute("""
            CREATE TRIGGER record_completion AFTER UPDATE OF status ON tasks FOR EACH ROW
            WHEN (NEW.status = 'completed' AND OLD.status IS DISTINCT FROM 'completed')
            EXECUTE FUNCTION record_completion()""")

    def completions(self) -> collections.Counter:
        return collections.Counter(r[0] for r in self.rows("SELECT task_id FROM completions"))

    def outage(self, seconds: float) -> str:
        """Take the database away from every client for ``seconds``; returns how.

        A real restart of the PostgreSQL server (``pg_ctlcluster ... restart``) when
        ``FOREPERSON_TEST_PG_RESTART=1``, or by default when it is safe: the cluster is
        local, ``pg_ctlcluster`` is there, and no other database has clients (a restart
        would break their work). Otherwise (or with ``FOREPERSON_TEST_PG_RESTART=0``) the
        test database alone refuses new connections for ``seconds`` and every connection
        to it is terminated, which is what a restart looks like to its clients.
        """
        mode = os.environ.get("FOREPERSON_TEST_PG_RESTART", "auto")
        if mode == "1" or (mode == "auto" and self._restart_is_safe()):
            version = sorted(os.listdir("/etc/postgresql"))[-1]
            self.conn.close()
            began = time.monotonic()
            subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", version, "main",
                            "restart"], check=True, timeout=120, capture_output=True)
            wait_until(self._reconnect, timeout=60, what="PostgreSQL to come back")
            return f"server restarted in {time.monotonic() - began:.1f} s"
        db = str(self.value("SELECT current_database()"))
        ident = sql.Identifier(db)
        # ALTER DATABASE cannot name the database it runs in: use the maintenance one.
        with psycopg.connect(make_conninfo(self.dsn, dbname="postgres"),
                             autocommit=True) as admin:
            admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(ident))
            try:
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = %s", (db,))
                time.sleep(seconds)   # the length of the outage, not a synchronisation
            finally:
                admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(ident))
        wait_until(self._reconnect, timeout=30, what="the test database to accept us again")
        return f"connections terminated, refused for {seconds:g} s"

    def _restart_is_safe(self) -> bool:
        import shutil

        host = str(conninfo_to_dict(self.dsn).get("host", "localhost"))
        if host not in ("localhost", "127.0.0.1", "::1") and not host.startswith("/"):
            return False
        if not shutil.which("pg_ctlcluster") or not os.path.isdir("/etc/postgresql"):
            return False
        others = self.value("SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                            "'client backend' AND datname IS DISTINCT FROM current_database()")
        return others == 0

    def _reconnect(self) -> bool:
        self.conn.close()
        try:
            self.conn = psycopg.connect(self.dsn, autocommit=True)
            self.conn.execute("SELECT set_config('search_path', quote_ident(%s), false)",
                              (self.schema,))
            return True
        except psycopg.OperationalError:
            return False
