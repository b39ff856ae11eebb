"""A worker process's look-ahead grows with short tasks and never hoards long ones
(issue 18: eight one-slot processes drained at 0.4x one eight-slot process when each
claimed one task ahead)."""

from __future__ import annotations

from foreperson.work import SqliteStore, Worker
from foreperson.work.dispatcher import LOOK_AHEAD_S
from foreperson.work.process import PROCESS_PREFETCH, process_supervisor


def noop(task):
    return {}


def supervisor(tmp_path, concurrency: int = 1, prefetch: int | None = None):
    store = SqliteStore(tmp_path / "w.db")
    worker = Worker("w", {"k"}, fn=noop, concurrency=concurrency)
    return process_supervisor(store, worker, prefetch=prefetch), worker


def room(sup) -> int:
    _, free, _ = sup.dispatcher.pull_plan(sup.prefetch)
    return free


def test_one_task_ahead_per_slot_until_a_call_is_timed(tmp_path):
    sup, _ = supervisor(tmp_path, concurrency=3)
    assert room(sup) == 3 + 3


def test_short_tasks_are_claimed_many_per_round_trip(tmp_path):
    sup, _ = supervisor(tmp_path)
    sup.dispatcher.ran("w", 0.0005)
    assert room(sup) == 1 + PROCESS_PREFETCH


def test_the_look_ahead_is_what_the_slots_finish_in_its_window(tmp_path):
    sup, _ = supervisor(tmp_path, concurrency=2)
    call_s = LOOK_AHEAD_S / 3.4                 # each slot finishes 3.4 in the window
    sup.dispatcher.ran("w", call_s)
    assert room(sup) == 2 + 6


def test_long_tasks_keep_one_ahead_per_slot(tmp_path):
    sup, _ = supervisor(tmp_path)
    sup.dispatcher.ran("w", 0.0005)
    for _ in range(40):                         # the tasks became long: the mean follows
        sup.dispatcher.ran("w", 5.0)
    assert room(sup) == 1 + 1


def test_an_explicit_prefetch_is_the_most_held(tmp_path):
    sup, _ = supervisor(tmp_path, prefetch=2)
    sup.dispatcher.ran("w", 0.0005)
    assert room(sup) == 1 + 2
    none, _ = supervisor(tmp_path, prefetch=0)
    none.dispatcher.ran("w", 0.0005)
    assert room(none) == 1
