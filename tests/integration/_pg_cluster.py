"""A PostgreSQL cluster of the test's own (initdb in a temporary directory, a free port),
so that a test can restart the server in the middle of a job without touching the
machine's cluster or anyone else's connections."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

BIN = Path("/usr/lib/postgresql")


def _bin(tool: str) -> str:
    """The server's own binary (Debian keeps them out of PATH, behind wrappers)."""
    versions = sorted(BIN.iterdir(), key=lambda p: p.name) if BIN.is_dir() else []
    for version in reversed(versions):
        candidate = version / "bin" / tool
        if candidate.exists():
            return str(candidate)
    found = shutil.which(tool)
    if found:
        return found
    raise FileNotFoundError(f"{tool} not found (install the PostgreSQL server package)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateCluster:
    """A throwaway cluster: ``start()``, ``restart()``, ``stop()``; ``dsn`` reaches its
    ``postgres`` database as user ``postgres`` (trust authentication). Its files live in
    a directory of their own under the system's temporary directory (the server runs as
    ``postgres`` when the tests run as root, and pytest's own folders are private)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="foreperson-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as_postgres, *args], check=True, capture_output=True,
                       timeout=120)

    def start(self) -> PrivateCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        if self._as_postgres:
            shutil.chown(self.root, "postgres")
        if not self.data.exists():
            self._run(_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                      "--no-sync", "-E", "UTF8")
        self._ctl("start")
        return self

    def _ctl(self, action: str) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c max_connections=100")
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l",
                  str(self.root / "server.log"), "-m", "fast", "-w", "-t", "60", action)

    def restart(self) -> float:
        """Stop (fast: every connection is terminated) and start again; returns seconds."""
        began = time.monotonic()
        self._ctl("restart")
        return time.monotonic() - began

    def accepts(self) -> bool:
        """Whether a connection can be made now."""
        try:
            psycopg.connect(self.dsn, connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        """Stop the server and remove its files."""
        if self.data.exists():
            with contextlib.suppress(subprocess.CalledProcessError):
                self._ctl("stop")
        shutil.rmtree(self.root, ignore_errors=True)
