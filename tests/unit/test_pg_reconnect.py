"""The outage rule of the PostgreSQL store (issue 21 item 3), without a server: a store
call retried on transient failures only, for a bounded time, logged once each way."""

from __future__ import annotations

import logging

import pytest

from foreperson.errors import StoreError
from foreperson.work.stores._pg_reconnect import Outage


def failing(times: int, *, transient: bool = True):
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise StoreError("server closed the connection unexpectedly", transient=transient)
        return "ok"

    return call, calls


def test_a_call_in_an_outage_is_retried_and_the_outage_is_logged_once_each_way(caplog):
    pauses: list[float] = []
    outage = Outage("db/test", 60.0, sleep=pauses.append)
    call, calls = failing(4)
    with caplog.at_level(logging.WARNING, logger="foreperson.store.postgres"):
        assert outage.call(call) == "ok"
        assert outage.call(lambda: "again") == "again"
    assert len(calls) == 5 and pauses == [0.1, 0.2, 0.4, 0.8]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2
    assert said[0].startswith("PostgreSQL (db/test) is unreachable: server closed")
    assert "retrying for up to 60 s" in said[0]
    assert said[1].startswith("PostgreSQL (db/test) is back after")


def test_a_failure_that_is_not_transient_is_raised_at_once():
    outage = Outage("db/test", 60.0, sleep=lambda s: pytest.fail("it waited"))
    call, calls = failing(1, transient=False)
    with pytest.raises(StoreError, match="closed the connection"):
        outage.call(call)
    assert len(calls) == 1


def test_past_the_bound_the_call_fails_saying_how_long_it_waited():
    clock = [0.0]
    outage = Outage("db/test", 3.0, sleep=lambda s: clock.__setitem__(0, clock[0] + s),
                    clock=lambda: clock[0])
    call, calls = failing(100)
    with pytest.raises(StoreError, match="longer than the 3 s a store call waits") as info:
        outage.call(call)
    assert info.value.transient and 3 <= len(calls) <= 6


def test_a_call_made_inside_another_is_not_retried_twice():
    outage = Outage("db/test", 60.0, sleep=lambda s: None)
    inner, inner_calls = failing(2)
    outer_calls: list[int] = []

    def outer() -> str:
        outer_calls.append(1)
        return outage.call(inner)         # a store method calling another one

    assert outage.call(outer) == "ok"
    assert len(outer_calls) == 3 and len(inner_calls) == 3    # retried once, outside
