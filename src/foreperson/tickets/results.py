"""The results file: one JSON line per ticket, written once (:class:`Outbox`), and the
checks, before any work, that a file the job writes can be written.

The file is its own ledger: a ticket is sent when its line is in the file, so a re-run
after a crash skips every ticket already there. Each file the job writes is held under
an exclusive lock (:func:`open_exclusive`) that dies with the process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigurationError, InputError, RunError

__all__ = ["OUTPUT_FIELDS", "Outbox", "check_output_path", "check_writable_path",
           "open_exclusive"]

OUTPUT_FIELDS = ("id", "category", "confidence", "priority", "language", "needs_human",
                 "reason", "draft_reply", "attempts")


def _probe(path: Path, option: str) -> None:
    """Prove ``path`` (an existing file) or its folder can be written by writing, not by
    asking ``os.access`` (which says yes to root everywhere).

    Raises:
        ConfigurationError: it cannot (the option and the reason named).
    """
    try:
        if path.exists():
            with open(path, "ab"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".foreperson-probe-"):
                pass
    except OSError as exc:
        where = path if path.exists() else path.parent
        raise ConfigurationError(f"{option} {path}: cannot write to {where} "
                                 f"({exc.strerror or exc})") from None


def check_writable_path(path: str | Path, option: str, what: str) -> Path:
    """Check before any work that ``option``'s file can be written: a regular file or
    nothing yet, in a folder that exists (it is created) and can be written.

    Args:
        path: the file.
        option: the command-line option that named it (``--out``, ``--db``).
        what: what the file holds, for the message.

    Returns:
        the path.

    Raises:
        ConfigurationError: a directory or special file, or a folder that cannot be
            created or written.
    """
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ConfigurationError(f"{option} {path}: not a regular file; give a file path for "
                                 f"{what}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"{option} {path}: cannot create its folder: {exc.strerror or exc}") from None
    _probe(path, option)
    return path


def check_output_path(path: str | Path) -> Path:
    """Check that results can be written to ``path`` before any work starts (see
    :func:`check_writable_path`).

    Returns:
        the path.

    Raises:
        ConfigurationError: the path is a directory or a special file (a device, a pipe),
            or its folder cannot be created or written.
    """
    return check_writable_path(path, "--out", "the JSON Lines results")


def open_exclusive(path: str | Path, mode: str, busy: str) -> IO[Any]:
    """Open ``path`` holding an exclusive lock for as long as it stays open; the lock
    dies with the process, so a crashed holder never blocks the next run.

    Args:
        path: the file (created when ``mode`` creates it).
        mode: as for :func:`open` (``"a+b"``, ``"a+"``).
        busy: the message when another process holds the lock.

    Returns:
        the open file; closing it releases the lock.

    Raises:
        ConfigurationError: another live process holds it (``busy`` is the message).
    """
    handle = open(path, mode)  # noqa: SIM115 - held for the job's life
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise ConfigurationError(busy) from None
    return handle


def _write_failure(path: Path, exc: OSError) -> str:
    """One line for a results write that failed: a full disk named as such."""
    if exc.errno == errno.ENOSPC:
        return (f"cannot write results to {path}: the disk is full (the disk holding "
                f"{path.resolve().parent}); no partial line was left: free some space and "
                "run the same command again (finished work is kept)")
    return (f"cannot write results to {path}: {exc.strerror}; fix that and run the same "
            "command again (finished work is kept)")


class Outbox:
    """The output file, written once per ticket.

    The file is its own ledger: a ticket is sent when its line is in the file. Lines
    are flushed and fsynced before they count; on opening, the ids already present are
    read back and a torn last line (a crash mid-write) is cut off. An exclusive lock on
    the file keeps a second job from writing to it at the same time.

    Args:
        path: the JSON Lines output file (created when missing).

    Raises:
        ConfigurationError: another process holds the file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = check_output_path(path)
        self._file = open_exclusive(
            self.path, "a+b", f"{self.path} is being written by another foreperson job; "
            "wait for it or choose another --out")
        self.sent: set[str] = set()
        try:
            self._recover()
        except BaseException:
            self._file.close()
            raise

    def _recover(self) -> None:
        """Read back the ids already sent, a line at a time (memory grows with the
        number of ids, not with the file). The file is checked whole before anything is
        changed: only a torn last line that starts like a results line (a crash in the
        middle of a write) is cut off; any other content means this is not our file."""
        self._file.seek(0)
        complete, number, tail = 0, 0, b""
        for raw in self._file:
            number += 1
            if not raw.endswith(b"\n"):
                tail = raw                    # the last line, without its end
                break
            complete += len(raw)
            if not raw.strip():
                continue
            try:
                self.sent.add(str(json.loads(raw)["id"]))
            except (ValueError, KeyError, TypeError, RecursionError):
                raise InputError("not a foreperson results file (this line is not a results "
                                 "line); choose another --out", path=str(self.path),
                                 line=number) from None
        if tail.strip():
            if not tail.lstrip().startswith(b'{"id": '):
                raise InputError("not a foreperson results file (it does not end with a "
                                 "complete line); choose another --out",
                                 path=str(self.path), line=number)
            self._file.truncate(complete)
        self._file.seek(0, os.SEEK_END)

    def send(self, records: list[dict[str, Any]]) -> int:
        """Append the records whose id is not in the file yet; returns how many."""
        fresh: dict[str, dict[str, Any]] = {}
        for record in records:
            key = str(record["id"])
            if key not in self.sent and key not in fresh:
                fresh[key] = record
        if not fresh:
            return 0
        blob = b"".join(json.dumps({k: r.get(k) for k in OUTPUT_FIELDS},
                                   ensure_ascii=False).encode() + b"\n"
                        for r in fresh.values())
        fd = self._file.fileno()
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(blob)
            while view:                       # unbuffered: nothing is left to flush later
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)       # whole lines only: cut what got through
            raise RunError(_write_failure(self.path, exc)) from exc
        self.sent.update(fresh)
        return len(fresh)

    def close(self) -> None:
        """Release the file and its lock."""
        if not self._file.closed:
            self._file.close()
