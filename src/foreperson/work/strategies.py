"""Work distribution strategies (seed 000, "work distribution strategies, compared").

A strategy picks, for one task, one worker among those that can do its kind and have
a free slot. Load is the sum of estimated seconds of the work a worker holds, so one
10-second task does not look like one 2-second task.

==============  =========================================================================
round_robin     cycle through the eligible workers, ignoring load
least_loaded    the eligible worker with the least estimated seconds of work held
capability      the eligible worker with the highest ``skill[kind]``
balanced        (default) least estimated seconds, ties to the higher skill; each
                dispatch round places the longest ready tasks first
==============  =========================================================================
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ConfigurationError

__all__ = ["STRATEGIES", "WorkerSlot", "lower_bound", "pick_worker", "simulate_makespan"]

STRATEGIES = ("balanced", "least_loaded", "round_robin", "capability")
_LOAD = operator.attrgetter("load_s")


@dataclass
class WorkerSlot:
    """What a strategy knows about one worker.

    Attributes:
        name: the worker's name.
        can_do: kinds it accepts.
        skill: kind -> skill score (higher is better; default 1.0).
        capacity: tasks it may hold at once.
        active: tasks it holds now.
        load_s: estimated seconds of the work it holds.
    """

    name: str
    can_do: frozenset[str]
    skill: dict[str, float] = field(default_factory=dict)
    capacity: int = 1
    active: int = 0
    load_s: float = 0.0

    def free(self) -> bool:
        """Whether it has a free slot."""
        return self.active < self.capacity


def pick_worker(strategy: str, kind: str, slots: Sequence[WorkerSlot],
                rr: dict[str, int]) -> WorkerSlot | None:
    """Choose the worker for one task of ``kind``.

    Args:
        strategy: one of :data:`STRATEGIES`.
        kind: the task's kind.
        slots: every worker, in registration order (those without a free slot or that
            cannot do ``kind`` are skipped).
        rr: round-robin counters per kind, updated in place.

    Returns:
        The chosen slot, or None when no eligible worker has a free slot.

    Raises:
        ConfigurationError: unknown strategy.
    """
    eligible = [s for s in slots if s.active < s.capacity and kind in s.can_do]
    if not eligible:
        return None
    if strategy == "round_robin":
        turn = rr.get(kind, 0)
        rr[kind] = turn + 1
        return eligible[turn % len(eligible)]
    if strategy == "least_loaded":
        return min(eligible, key=_LOAD)
    if strategy == "capability":
        return max(eligible, key=lambda s: s.skill.get(kind, 1.0))
    if strategy == "balanced":
        least = min(eligible, key=_LOAD)
        tied = [s for s in eligible if s.load_s == least.load_s]
        if len(tied) == 1:
            return least
        return max(tied, key=lambda s: s.skill.get(kind, 1.0))
    raise ConfigurationError(f"unknown strategy {strategy!r}: choose one of {STRATEGIES}")


def simulate_makespan(durations: Sequence[float], workers: int, strategy: str, *,
                      longest_first: bool | None = None) -> float:
    """Makespan of placing every task up front on ``workers`` identical workers.

    The deterministic model of seed 000's comparison: tasks arrive in order, each is
    queued on the worker the strategy picks (every worker accepts any number), and a
    worker runs its queue back to back. Load is queued seconds.

    Args:
        durations: each task's duration in seconds, in arrival order.
        workers: number of workers (>= 1).
        strategy: one of :data:`STRATEGIES`.
        longest_first: place the longest tasks first; by default only ``balanced`` does.

    Returns:
        Seconds until the last worker finishes. Seed 000's example
        ``[10, 2, 2, 10, 2, 2, 10, 2, 2]`` on 3 workers gives round_robin 30,
        least_loaded 16 and balanced (longest first) 14, the optimum.
    """
    if workers < 1:
        raise ConfigurationError("workers must be >= 1")
    slots = [WorkerSlot(f"w{i + 1}", frozenset({"t"}), capacity=len(durations) + 1)
             for i in range(workers)]
    order = list(durations)
    if longest_first if longest_first is not None else strategy == "balanced":
        order = sorted(order, reverse=True)
    rr: dict[str, int] = {}
    for seconds in order:
        slot = pick_worker(strategy, "t", slots, rr)
        assert slot is not None
        slot.active += 1
        slot.load_s += seconds
    return max(s.load_s for s in slots)


def lower_bound(durations: Sequence[float], workers: int) -> float:
    """The makespan no placement can beat: max(total / workers, longest task)."""
    return max(sum(durations) / workers, max(durations, default=0.0))

