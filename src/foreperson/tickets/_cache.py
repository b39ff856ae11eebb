"""Trained models kept as JSON between processes: where, under which name, how written.

A model that takes seconds to train keeps its trained state (a JSON object) in the cache
folder (:func:`cache_dir`), in a file whose name carries a key (:func:`cache_key`)
derived from everything the state depends on: the training data, the versions of the
libraries that trained it, the version of the state's layout. A state is therefore only
ever read back by the training that wrote it; anything else gets another name.

Files are written under a temporary name and renamed into place (:func:`write`), so a
reader never sees half a file, and two processes training at once both leave a whole
one. A cache that cannot be read, parsed or written is passed over: the caller trains
instead. JSON only, never pickle: a cache file is data, not code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cache_dir", "cache_key", "keep_newest", "library_version", "load", "touch",
           "write"]

T = TypeVar("T")


def cache_dir() -> Path:
    """The cache folder: ``$FOREPERSON_CACHE_DIR``, else ``$XDG_CACHE_HOME/foreperson``,
    else ``~/.cache/foreperson`` (read from the environment on every call; it may not
    exist yet)."""
    if os.environ.get("FOREPERSON_CACHE_DIR"):
        return Path(os.environ["FOREPERSON_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "foreperson"


def cache_key(*parts: str) -> str:
    """24 hexadecimal characters of the SHA-256 of ``parts`` joined by NUL characters."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def library_version(distribution: str) -> str:
    """The installed version of ``distribution`` (e.g. ``"scikit-learn"``), read from
    its metadata without importing it; "" when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""


def load(path: Path, read: Callable[[dict[str, Any]], T]) -> T | None:
    """``read(state)`` of the JSON object in ``path``, or None when the file is missing
    or unreadable, does not hold a JSON object, or ``read`` refuses it (ValueError,
    KeyError, TypeError, IndexError: not a state it knows; RecursionError: nested too
    deeply to be one)."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        return read(state) if isinstance(state, dict) else None
    except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None


def write(path: Path, state: Any) -> bool:
    """Write ``state`` (JSON-serialisable) to ``path`` at once: to a temporary file of
    the same folder (created when missing), then renamed over ``path``.

    Returns:
        whether the file was written (False: the folder or disk refused; nothing left).
    """
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent,
                                         prefix=f".{path.stem}-", suffix=".tmp",
                                         delete=False) as out:
            temporary = out.name
            # one string, then one write: about a third faster than json.dump's chunks
            out.write(json.dumps(state, ensure_ascii=False, separators=(",", ":")))
        os.replace(temporary, path)
        temporary = None
        return True
    except OSError:
        return False
    finally:
        if temporary is not None:          # not renamed into place: nothing left behind
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def touch(path: Path) -> None:
    """Mark ``path`` as just used (its modification time: :func:`keep_newest` keeps the
    most recently used files); a file that resists is passed over."""
    with contextlib.suppress(OSError):
        os.utime(path)


def keep_newest(folder: Path, pattern: str, keep: int) -> None:
    """Remove all but the ``keep`` most recently modified files of ``folder`` whose name
    matches the glob ``pattern`` (files that vanish or resist are passed over)."""
    try:
        found = [(p.stat().st_mtime, p) for p in folder.glob(pattern)]
    except OSError:
        return
    for _, old in sorted(found, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            old.unlink()
