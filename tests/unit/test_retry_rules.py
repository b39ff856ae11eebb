"""Backoff with jitter and error classification (seed 000, "handling worker failure")."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from foreperson import GiveUp, Retry
from foreperson.errors import ConfigurationError
from foreperson.retry import backoff_seconds, is_retryable, retry_after_seconds


@given(st.integers(min_value=1, max_value=200), st.integers(min_value=0, max_value=2**31))
def test_backoff_doubles_up_to_the_cap_with_25_percent_jitter(attempt, seed):
    delay = backoff_seconds(attempt, base=2.0, cap=60.0, rng=random.Random(seed))
    nominal = min(60.0, 2.0 * 2 ** (attempt - 1))
    assert 0.75 * nominal <= delay <= 1.25 * nominal


def test_backoff_spreads_tasks_that_failed_together():
    rng = random.Random(1)
    delays = {round(backoff_seconds(1, rng=rng), 6) for _ in range(50)}
    assert len(delays) == 50          # no thundering herd: no two retry at the same instant


def test_backoff_rejects_nonsense():
    with pytest.raises(ConfigurationError, match="attempt counts from 1"):
        backoff_seconds(0)


class HTTPError(Exception):
    def __init__(self, status: int, headers: dict | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.response = type("R", (), {"status_code": status, "headers": headers or {}})()


class Shape(BaseModel):
    n: int


def validation_error() -> ValidationError:
    try:
        Shape.model_validate({"n": "x"})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize(("error", "retry"), [
    (TimeoutError("slow"), True), (ConnectionResetError("reset"), True),
    (HTTPError(429), True), (HTTPError(503), True), (HTTPError(500), True),
    (HTTPError(400), False), (HTTPError(404), False), (HTTPError(422), False),
    (ValueError("bad payload"), True), (KeyError("field"), False),
    (json.JSONDecodeError("Expecting value", '{"truncated": ', 14), True),
    (TypeError("not a dict"), False), (AttributeError("no such field"), False),
    (validation_error(), False), (GiveUp("no"), False), (Retry("again"), True),
    (RuntimeError("something odd"), True),
])
def test_errors_are_classified_before_retrying(error, retry):
    assert is_retryable(error) is retry


def test_retry_after_header_in_seconds_or_as_a_date():
    assert retry_after_seconds(HTTPError(429, {"retry-after": "7"})) == 7.0
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds(HTTPError(503, {"Retry-After": later}), now=now) == 30.0
    assert retry_after_seconds(HTTPError(503, {"retry-after": "soon"})) is None
    assert retry_after_seconds(Retry("x", after_s=3)) == 3
    assert retry_after_seconds(ValueError()) is None
