"""``foreperson status --watch`` (issue 13 item 4): the three numbers as terminal charts,
redrawn until Ctrl-C; the counts follow the store between frames."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time

from foreperson.observe.watch import Samples, render_charts
from foreperson.work import SqliteStore, Task


def test_watch_redraws_until_ctrl_c_and_follows_the_store(tmp_path):
    db = tmp_path / "jobs.db"
    store = SqliteStore(db)
    store.add([Task("k", id=str(i)) for i in range(3)])
    proc = subprocess.Popen([sys.executable, "-m", "foreperson.cli.main", "status", "--db",
                             str(db), "--watch", "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()

    def next_summary(deadline: float) -> str:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if " tasks: pending" in line:
                return line
        raise AssertionError("no frame drawn in time")

    try:
        deadline = time.monotonic() + 30
        first = next_summary(deadline)
        assert first.startswith("3 tasks: pending 3")
        task = store.claim("w1", {"k"}, 1, start=True)[0]
        store.complete(task.id, task.lease_token, {})
        while "completed 1" not in next_summary(deadline):      # a later frame shows it
            pass
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0                          # Ctrl-C ends it cleanly
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        store.close()
        proc.stdout.close()
        proc.stderr.close()


def test_the_charts_name_the_three_numbers(tmp_path):
    store = SqliteStore(tmp_path / "jobs.db")
    store.add([Task("k", id="a"), Task("k", id="b")])
    samples = Samples()
    samples.add(store.stats())
    store.claim("busy-worker", {"k"}, 1, start=True)
    samples.add(store.stats())
    text = render_charts(samples, width=80, height=30, colorless=True)
    for title in ("tasks by status", "active tasks per worker", "oldest unfinished task"):
        assert title in text
    assert "busy-worker" in render_charts(samples, width=100, height=60, colorless=True)
    store.close()


def test_with_no_activity_the_axes_start_at_zero_and_time_is_labelled(tmp_path):
    store = SqliteStore(tmp_path / "idle.db")
    samples = Samples()
    for _ in range(3):                      # an empty store: every series is all zeros
        samples.add(store.stats())
    text = render_charts(samples, width=80, height=33, colorless=True)
    ticks = [line.split("┤", 1)[0].strip() for line in text.splitlines() if "┤" in line]
    assert ticks and all(float(t) >= 0 for t in ticks)           # no -1..1 around a flat 0
    assert {float(t) for t in ticks} >= {0.0, 1.0}
    assert text.count("seconds since the watch started") == 1     # under the shared x axis
    store.close()
