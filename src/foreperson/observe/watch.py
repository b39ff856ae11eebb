"""``foreperson status --watch``: seed 000's three numbers as terminal charts, redrawn
every second (``plotext``, imported lazily: ``pip install 'foreperson[observe]'``)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..errors import MissingDependency, StoreError
from ..work.store import StoreStats, TaskStore
from ..work.task import Status

__all__ = ["KEEP", "Samples", "render_charts", "watch"]

KEEP = 120
"""Samples kept (two minutes at one a second)."""


@dataclass
class Samples:
    """The three numbers sampled over time.

    Attributes:
        at: seconds since the first sample, per sample.
        counts: per status, its count at each sample.
        active: per worker, its active tasks at each sample.
        oldest_s: the oldest unfinished task's age at each sample (0: none), seconds.
    """

    at: list[float] = field(default_factory=list)
    counts: dict[str, list[int]] = field(default_factory=dict)
    active: dict[str, list[int]] = field(default_factory=dict)
    oldest_s: list[float] = field(default_factory=list)
    _t0: float | None = None

    def add(self, stats: StoreStats) -> None:
        """Append one snapshot (the oldest samples beyond :data:`KEEP` are dropped)."""
        now = stats.now.timestamp()
        self._t0 = now if self._t0 is None else self._t0
        self.at.append(now - self._t0)
        for status in Status:
            self.counts.setdefault(status.value, []).append(stats.counts.get(status, 0))
        for name in set(self.active) | set(stats.active_by_worker):
            active = self.active.setdefault(name, [0] * (len(self.at) - 1))
            active.append(stats.active_by_worker.get(name, 0))
        self.oldest_s.append(stats.oldest_unfinished_age_s or 0.0)
        if len(self.at) > KEEP:
            kept: list[list[Any]] = [self.at, self.oldest_s, *self.counts.values(),
                                     *self.active.values()]
            for series in kept:
                del series[0]


def _plotext() -> Any:
    try:
        import plotext
    except ImportError as exc:
        raise MissingDependency("terminal charts need plotext: "
                                "pip install 'foreperson[observe]'") from exc
    return plotext


def render_charts(samples: Samples, *, width: int = 100, height: int = 36,
                  colorless: bool = False) -> str:
    """The three charts, one under the other, as text.

    Args:
        samples: what was sampled.
        width: columns.
        height: rows for the three charts together.
        colorless: leave out colour codes.

    Returns:
        the charts (plotext's rendering).

    Raises:
        MissingDependency: plotext is not installed.
    """
    fig = _plotext().figure
    fig.clear()
    fig.subplots(3, 1)
    x = samples.at or [0.0]
    charts: list[tuple[str, dict[str, list[Any]]]] = [
        ("tasks by status", {k: v for k, v in samples.counts.items() if any(v)}),
        ("active tasks per worker", dict(sorted(samples.active.items()))),
        ("oldest unfinished task, seconds", {"oldest": samples.oldest_s}),
    ]
    for row, (title, series) in enumerate(charts, start=1):
        sub = fig.subplot(row, 1)
        sub.title(title)
        for name, values in (series or {"none": [0] * len(x)}).items():
            sub.draw(sub.signal(x, values or [0] * len(x)).lines().label(name))
        # counts and ages are never negative: the y axis starts at 0, and with no
        # activity yet it spans 0..1 (plotext would centre a flat line on -1..1)
        top = max((v for values in series.values() for v in values), default=0)
        sub.ruler("y").lim(0, top if top > 0 else 1)
    # the three share their x axis: one label, under the last, keeps the others' rows
    fig.subplot(len(charts), 1).label("seconds since the watch started", axis="x")
    fig.plot_size(width, height)
    return str(fig.build().string(colorless=colorless))


def _summary(stats: StoreStats) -> str:
    counts = "  ".join(f"{s.value} {stats.counts.get(s, 0)}" for s in Status)
    age = stats.oldest_unfinished_age_s
    busy = ", ".join(f"{k} {v}" for k, v in sorted(stats.active_by_worker.items())) or "none"
    return (f"{stats.total} tasks: {counts}\nactive per worker: {busy}\n"
            f"oldest unfinished: {'none' if age is None else f'{age:.1f} s'}  "
            f"(Ctrl-C to stop)")


def watch(store: TaskStore, *, interval_s: float = 1.0, run_id: str | None = None,
          out: TextIO | None = None, frames: int | None = None,
          size: Callable[[], tuple[int, int]] | None = None) -> int:
    """Redraw the charts every ``interval_s`` seconds until Ctrl-C (or ``frames``).

    Args:
        store: the store to watch.
        interval_s: seconds between redraws.
        run_id: one run's tasks (None: the whole store).
        out: where to draw (default stdout); the screen is cleared before each frame
            when it is a terminal.
        frames: stop after this many frames (None: until interrupted).
        size: returns ``(columns, rows)`` (default: the terminal's).

    Returns:
        frames drawn.

    Raises:
        MissingDependency: plotext is not installed.
    """
    import shutil

    out = out or sys.stdout
    tty = out.isatty()
    samples = Samples()
    drawn = 0
    try:
        while frames is None or drawn < frames:
            began = time.monotonic()
            try:
                stats = store.stats(run_id=run_id)
            except StoreError as exc:
                out.write(f"store unavailable: {exc}\n")
            else:
                samples.add(stats)
                columns, rows = size() if size else shutil.get_terminal_size((100, 40))
                text = render_charts(samples, width=max(40, columns),
                                     height=max(18, rows - 4), colorless=not tty)
                out.write(("\x1b[H\x1b[2J" if tty else "") + text + "\n" + _summary(stats)
                          + "\n")
                out.flush()
                drawn += 1
            if frames is None or drawn < frames:
                time.sleep(max(0.0, interval_s - (time.monotonic() - began)))
    except KeyboardInterrupt:
        pass
    return drawn
