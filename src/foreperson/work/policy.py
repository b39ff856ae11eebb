"""Store policy: what each status transition means, written once for every store.

The memory, SQLite and PostgreSQL stores all follow the rules below; the SQL stores
pass these names and messages as parameters, so the rules live here and nowhere else.

==============  ==================================================================
claim           PENDING/FAILED, ready (dependencies COMPLETED, past ``not_before``,
                locks free) -> ASSIGNED with a fresh lease token and a lease of
                ``stale_after`` (the task's, else its kind's, else the claiming
                worker's) seconds. The attempt is **not** counted yet: a task that
                is prefetched and never started costs no attempt (claim with
                ``start=True`` goes straight to RUNNING and counts it). The reason
                of the previous status stays until the task completes (a task that
                is ASSIGNED with ``lease_expired`` is one whose holder died: the run
                loop records its start before running it again).
start           ASSIGNED -> RUNNING; the attempt is counted here (an attempt that
                completes or fails while still ASSIGNED is counted then: it ran).
heartbeat       renews the lease: expiry = now + the lease's seconds.
complete        -> COMPLETED; never run again.
fail            -> FAILED (reason ``retrying``) with ``not_before`` when a retry is
                scheduled, else DEAD: ``retries_exhausted`` when every attempt was
                used, ``not_retryable`` otherwise (GiveUp, a 4xx, a validation
                error).
release         a graceful give-back -> PENDING (``released``); a started attempt
                is given back (not counted).
back_off        a 429 from a shared resource -> PENDING (``rate_limited``), attempt
                given back, resource closed for its ``Retry-After``.
reclaim         a lease that expired (judged by the store's clock, whoever sweeps):
                a task that was RUNNING -> PENDING (``lease_expired``, the attempt
                stays counted and its error recorded), or DEAD
                (``retries_exhausted``) once its attempts are used, so a poison task
                that kills its worker every time ends; a task only ASSIGNED (never
                started) -> PENDING with nothing counted.
park            PENDING/FAILED whose dependency is DEAD -> DEAD
                (``dependency_dead``), so ``finished()`` always becomes true.
revive          DEAD -> PENDING (``revived``) with fresh attempts, together with
                the tasks parked because of it (found by their reason code).
==============  ==================================================================
"""

from __future__ import annotations

from enum import Enum

__all__ = ["EFFECT_CLAIMED", "EFFECT_DONE", "Reason", "dead_reason", "lease_expired_error"]


class Reason(str, Enum):  # noqa: UP042 - stored as its value, compared with strings
    """Why a task is in its status (``Task.reason``)."""

    RETRYING = "retrying"
    """FAILED: this attempt failed, another is scheduled at ``not_before``."""
    RETRIES_EXHAUSTED = "retries_exhausted"
    """DEAD: every attempt (``max_attempts``) was used."""
    NOT_RETRYABLE = "not_retryable"
    """DEAD: the error would repeat (GiveUp, a 4xx, a validation error)."""
    DEPENDENCY_DEAD = "dependency_dead"
    """DEAD: a task it depends on is DEAD (parked; revived with it)."""
    LEASE_EXPIRED = "lease_expired"
    """PENDING: its holder stopped heartbeating; it will run again."""
    RELEASED = "released"
    """PENDING: given back on a graceful stop, the attempt not counted."""
    RATE_LIMITED = "rate_limited"
    """PENDING: a shared resource said "too many requests"; the attempt not counted."""
    REVIVED = "revived"
    """PENDING: put back from DEAD by ``retry_dead`` (``foreperson retry``)."""


EFFECT_CLAIMED = "claimed"
"""An attempt said it is doing the side effect (``TaskContext.once``)."""
EFFECT_DONE = "done"
"""An attempt said the side effect is done (``TaskContext.done``): never again."""


def dead_reason(attempts: int, max_attempts: int) -> Reason:
    """The reason of a failure that schedules no retry.

    Args:
        attempts: attempts counted so far (including the failed one).
        max_attempts: attempts allowed.

    Returns:
        ``RETRIES_EXHAUSTED`` when every attempt was used, else ``NOT_RETRYABLE``.
    """
    return Reason.RETRIES_EXHAUSTED if attempts >= max_attempts else Reason.NOT_RETRYABLE


def lease_expired_error(worker: str | None, lease_s: float, attempt: int) -> str:
    """The error recorded when a running task's lease expired.

    Args:
        worker: the holder's name.
        lease_s: the lease, seconds.
        attempt: the attempt that was running.
    """
    return (f"worker {worker or '?'} stopped heartbeating: its lease of {lease_s:g} s "
            f"expired during attempt {attempt}")
