"""What a ticket becomes, and the functions that do the work.

Each ticket becomes three tasks of one run, linked by ``depends_on``::

    classify  ->  draft  ->  triage

The triage task's result is the ticket's output record (the runner,
:mod:`~foreperson.tickets.runner`, writes it to the results file). The model is part of
each task's kind and payload (:func:`model_fingerprint`), and the triage thresholds
travel in the payload (:func:`job_settings`), so a re-run or a worker process configured
differently is noticed (:mod:`~foreperson.tickets.rerun`).

Everything the task functions need is in a :class:`TicketJob` (the model and its
fingerprint): no module state. ``foreperson worker foreperson.tickets.job`` builds one
from the environment (see :meth:`TicketJob.from_environment`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigurationError, GiveUp
from ..work.app import App
from ..work.task import Task
from ..work.worker import current_batch, current_task
from .drafts import never_send
from .model import Classification, TicketModel, bundled_examples, load_examples, raised_priority
from .reader import Ticket, Tickets
from .triage import SIGNALS

__all__ = ["CLASSIFY", "DRAFT", "RAISE_PRIORITY", "TRIAGE", "TicketJob", "endpoint_down",
           "fingerprint_of", "job_settings", "kinds_for", "model_fingerprint",
           "parse_raise_priority", "ticket_app", "ticket_tasks"]

CLASSIFY, DRAFT, TRIAGE = "classify_ticket", "draft_reply", "triage_ticket"

_ENDPOINT_DOWN = re.compile(r"^GiveUp: the model endpoint (?P<endpoint>\S+) is not answering "
                            r"\((?P<why>.*)\): not retried")
"""The error a ticket's task is DEAD with when its language model's endpoint was not
answering (:func:`_endpoint_down_signal` writes it, :func:`endpoint_down` reads it)."""


def _endpoint_down_signal(exc: BaseException) -> GiveUp | None:
    """What a task function raises instead of ``exc`` when ``exc`` says the model's
    endpoint is not answering (its circuit breaker is open:
    :class:`~foreperson.models.EndpointUnavailable`): a :class:`GiveUp`, so the task is
    DEAD at once (another attempt before the breaker's cool-down would fail the same way,
    after it would wait a whole timeout again) and a re-run of the job tries it again
    (:func:`~foreperson.tickets.rerun.revive_endpoint_down`). None for any other error."""
    from ..models import EndpointUnavailable

    if not isinstance(exc, EndpointUnavailable):
        return None
    why = exc.reasons[-1] if exc.reasons else "no answer"
    return GiveUp(f"the model endpoint {exc.endpoint} is not answering ({why}): not "
                  f"retried; run the job again once it answers ({exc.failures} timeouts or "
                  "connection failures in a row)")


def endpoint_down(error: str | None) -> tuple[str, str] | None:
    """Whether a DEAD task's error says its model endpoint was not answering, and which.

    Args:
        error: the task's recorded error (``Task.error``).

    Returns:
        ``(endpoint, why)``: the endpoint's URL (credentials redacted) and its last
        failure (``"timed out after 30 s"``); None for any other error.
    """
    found = _ENDPOINT_DOWN.match(error or "")
    return None if found is None else (found["endpoint"], found["why"])


def model_fingerprint(model: Any) -> str:
    """A short hash of what decides a ticket's classification and draft: the model's
    kind and name and every training example (:func:`fingerprint_of`). Stored in each
    task's payload and kind, so a re-run with other examples (or a worker process
    configured differently) is noticed. The triage thresholds travel in the payload
    instead (``settings``)."""
    return fingerprint_of(type(model).__name__, getattr(model, "model_name", None),
                          getattr(model, "examples", ()))


def fingerprint_of(kind: str, model_name: str | None, examples: Iterable[Any]) -> str:
    """:func:`model_fingerprint` from its parts, before any model is trained: ``kind``
    is the model's class name (``TicketModel``, ``LlmTicketModel``), ``model_name`` the
    language model's name (None offline), ``examples`` the training examples.

    Returns:
        16 hexadecimal characters.
    """
    digest = hashlib.sha256(kind.encode())
    digest.update(repr(model_name).encode())
    for example in examples:
        digest.update(json.dumps([example.text, example.category, example.answer,
                                  example.priority,
                                  getattr(example, "language", "")]).encode())
    return digest.hexdigest()[:16]


def job_settings(target_precision: float, min_confidence: float | None,
                 never_send: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """The triage settings every task of a job carries (compared on a re-run).

    Args:
        target_precision: share (0..1) of unflagged tickets that should be right.
        min_confidence: a fixed confidence threshold (0..1), or None.
        never_send: ``(phrase, "file:line")`` pairs a draft must not say
            (:func:`~foreperson.tickets.drafts.load_never_send`); kept only when given.

    Returns:
        ``{"target_precision", "min_confidence"[, "never_send"]}`` (JSON values).
    """
    settings: dict[str, Any] = {"target_precision": target_precision,
                                "min_confidence": min_confidence}
    if never_send:
        settings["never_send"] = [[phrase, where] for phrase, where in never_send]
    return settings


def kinds_for(fingerprint: str) -> tuple[str, str, str]:
    """The classify / draft / triage kinds of a model: ``classify_ticket:<fingerprint>`` …

    The model is part of the kind, so a worker process configured with other examples
    or another model never claims the job's tasks (a worker claims only the kinds it
    can do) instead of failing them."""
    return (f"{CLASSIFY}:{fingerprint}", f"{DRAFT}:{fingerprint}", f"{TRIAGE}:{fingerprint}")


def ticket_tasks(ticket: Ticket, *, model: str = "", max_attempts: int = 3,
                 run_id: str | None = None,
                 settings: dict[str, Any] | None = None) -> list[Task]:
    """The three tasks of one ticket, with ids derived from the ticket id (so adding the
    same ticket twice is harmless).

    Args:
        ticket: the ticket.
        model: the :func:`model_fingerprint` the tasks must be run with (it is part of
            their kinds).
        max_attempts: attempts per task.
        run_id: the job's run.
        settings: the triage settings (``target_precision``, ``min_confidence``), in
            every task's payload.

    Returns:
        ``[classify, draft, triage]``, linked by ``depends_on``.
    """
    classify_kind, draft_kind, triage_kind = kinds_for(model)
    extra = {"settings": dict(settings)} if settings else {}
    text = {"ticket_id": ticket.id, "subject": ticket.subject, "body": ticket.body,
            "model": model, **extra}
    classify = Task(classify_kind, text, id=f"{ticket.id}/classify",
                    max_attempts=max_attempts, run_id=run_id)
    draft = Task(draft_kind, {"ticket_id": ticket.id, "model": model},
                 id=f"{ticket.id}/draft", depends_on=[classify.id], max_attempts=max_attempts,
                 run_id=run_id)
    triage = Task(triage_kind, {"ticket_id": ticket.id, "model": model, **extra},
                  id=f"{ticket.id}/triage", depends_on=[classify.id, draft.id],
                  max_attempts=max_attempts, run_id=run_id)
    return [classify, draft, triage]


RAISE_PRIORITY = ("security", "legal", "outage")
"""The triage signals that raise a ticket's priority to high, by default."""


def parse_raise_priority(raw: str, where: str) -> tuple[str, ...]:
    """Triage signal names separated by commas (``none``: none), checked.

    Args:
        raw: what the user wrote (``"security,legal"``).
        where: where it was written, for the error (an option or a variable's name).

    Returns:
        The names, in the order given.

    Raises:
        ConfigurationError: a name that is not a triage signal.
    """
    names = tuple(n.strip() for n in raw.split(",") if n.strip() and n.strip() != "none")
    unknown = [n for n in names if n not in SIGNALS]
    if unknown:
        raise ConfigurationError(f"{where}: {', '.join(unknown)} is not a triage signal "
                                 f"(one of {', '.join(SIGNALS)}, or none)")
    return names


def _raise_priority_setting() -> tuple[str, ...]:
    """``FOREPERSON_TICKETS_RAISE_PRIORITY`` (signal names separated by commas, ``none``
    for none), else :data:`RAISE_PRIORITY`.

    Raises:
        ConfigurationError: a name that is not a triage signal.
    """
    raw = os.environ.get("FOREPERSON_TICKETS_RAISE_PRIORITY")
    if raw is None:
        return RAISE_PRIORITY
    return parse_raise_priority(raw, "FOREPERSON_TICKETS_RAISE_PRIORITY")


def _timeout_setting() -> float | None:
    """``FOREPERSON_TICKETS_TIMEOUT_S`` (seconds), or None when unset.

    Raises:
        ConfigurationError: not a number of seconds > 0.
    """
    raw = os.environ.get("FOREPERSON_TICKETS_TIMEOUT_S", "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not (math.isfinite(value) and value > 0):
        raise ConfigurationError(f"FOREPERSON_TICKETS_TIMEOUT_S={raw!r}: give the seconds one "
                                 "request to the model may take, a number > 0 (as --timeout)")
    return value


def _text(payload: dict[str, Any]) -> str:
    return f"{payload.get('subject', '')}\n{payload.get('body', '')}".strip()


@dataclass(frozen=True, eq=False)
class TicketJob:
    """Everything the ticket job's task functions need: the model (a
    :class:`~foreperson.tickets.model.TicketModel` or
    :class:`~foreperson.tickets.llm.LlmTicketModel`), its fingerprint and the triage
    settings.

    Args:
        model: the model that classifies, drafts and triages.
        max_attempts: attempts per task before it is DEAD (default 3).
        target_precision: share (0..1) of unflagged tickets that should be classified
            right; the model fits its confidence threshold for it (default 0.9).
        min_confidence: a fixed confidence threshold (0..1) instead of the fitted one.
        raise_priority: the triage signals that raise a ticket's priority to ``high``
            (default :data:`RAISE_PRIORITY`: security, legal, outage; ``()``: none), the
            reason saying so (:func:`~foreperson.tickets.model.raised_priority`).
            Workers started by ``foreperson worker`` read it from
            ``FOREPERSON_TICKETS_RAISE_PRIORITY`` (names separated by commas; ``none``).
        never_send: ``(phrase, "file:line")`` pairs: a draft that says one is flagged
            (:func:`~foreperson.tickets.drafts.never_send`). They travel in the tasks'
            settings, so a worker process applies the job's list.
    """

    model: Any
    max_attempts: int = 3
    target_precision: float = 0.9
    min_confidence: float | None = None
    raise_priority: tuple[str, ...] = field(default_factory=lambda: _raise_priority_setting())
    never_send: tuple[tuple[str, str], ...] = ()
    _thresholds: dict[tuple[float, float | None], float] = field(default_factory=dict,
                                                                 repr=False)

    @functools.cached_property
    def fingerprint(self) -> str:
        """:func:`model_fingerprint` of the model."""
        return model_fingerprint(self.model)

    @property
    def kinds(self) -> tuple[str, str, str]:
        """The classify / draft / triage kinds of this model (:func:`kinds_for`)."""
        return kinds_for(self.fingerprint)

    @property
    def settings(self) -> dict[str, Any]:
        """The triage settings every task of this job carries (:func:`job_settings`)."""
        return job_settings(self.target_precision, self.min_confidence, self.never_send)

    @classmethod
    def from_environment(cls) -> TicketJob:
        """The job a ``foreperson worker foreperson.tickets.job`` process runs:
        ``FOREPERSON_TICKETS_EXAMPLES`` (a labelled file; default the bundled examples)
        and ``FOREPERSON_TICKETS_EXAMPLES_TEXT_COLUMN`` / ``_LABEL_COLUMN`` /
        ``_ANSWER_COLUMN`` (its columns, as ``--examples-text-column`` …),
        ``FOREPERSON_TICKETS_MODEL`` and ``FOREPERSON_TICKETS_BASE_URL`` (a language model
        instead of the offline one) and ``FOREPERSON_TICKETS_TIMEOUT_S`` (seconds one
        request to it may take, ``--timeout``). The examples and model must match the
        job's ``--examples`` / ``--model``, or the worker never claims the job's tasks
        (other kinds); the thresholds come with each task.

        Raises:
            ConfigurationError: ``FOREPERSON_TICKETS_TIMEOUT_S`` is not a number of
                seconds > 0, or the model cannot be built.
            InputError: the examples file cannot be read, or a column named does not
                exist in it.
        """
        path = os.environ.get("FOREPERSON_TICKETS_EXAMPLES")
        columns = {f"{role}_column":
                   os.environ.get(f"FOREPERSON_TICKETS_EXAMPLES_{role.upper()}_COLUMN") or None
                   for role in ("text", "label", "answer")}
        examples = load_examples(path, **columns) if path else bundled_examples()
        llm = os.environ.get("FOREPERSON_TICKETS_MODEL")
        if llm:
            from .llm import LlmTicketModel
            return cls(LlmTicketModel(llm, examples,
                                      base_url=os.environ.get("FOREPERSON_TICKETS_BASE_URL"),
                                      timeout_s=_timeout_setting()))
        return cls(TicketModel(examples))

    def run_id(self, tickets: Tickets) -> str:
        """The job's run: the same input and model give the same run, so a re-run
        continues it. Reads the input through once (a stream is not held)."""
        digest = hashlib.sha256(self.fingerprint.encode())
        for ticket in tickets:
            digest.update(b"\0" + ticket.id.encode())
        return f"tickets-{digest.hexdigest()[:16]}"

    def tasks(self, ticket: Ticket, run_id: str | None = None) -> list[Task]:
        """The three tasks of ``ticket`` (see :func:`ticket_tasks`)."""
        return ticket_tasks(ticket, model=self.fingerprint, max_attempts=self.max_attempts,
                            run_id=run_id, settings=self.settings)

    def app(self) -> App:
        """The task functions, under this model's kinds: batch functions (up to the
        model's ``batch_size`` tickets per call) when the model classifies in batches,
        one ticket per call otherwise (a language model)."""
        app = App()
        size = getattr(self.model, "batch_size", None)
        if size:
            functions: tuple[Any, ...] = (self._classify_batch, self._draft_batch,
                                          self._triage_batch)
        else:
            functions = (self._classify, self._draft, self._triage)
        for kind, fn in zip(self.kinds, functions, strict=True):
            app.task(kind, batch_size=size or None)(fn)
        return app

    def threshold(self, settings: dict[str, Any] | None) -> float:
        """The confidence threshold for a task's settings (0..1; above 1: every ticket
        needs a human), computed once per settings."""
        settings = settings or self.settings
        key = (float(settings.get("target_precision") or self.target_precision),
               settings.get("min_confidence"))
        if key not in self._thresholds:
            calibrate = getattr(self.model, "calibrate", None)
            if calibrate is not None:
                value = float(calibrate(key[0], key[1]).threshold)
            else:
                value = key[1] if key[1] is not None else float(self.model.min_confidence)
            self._thresholds[key] = value
        return self._thresholds[key]

    def _mismatch(self, task: Task) -> GiveUp | None:
        """An error for a task made for another model (None when it is ours)."""
        wanted = task.payload.get("model")
        if wanted and wanted != self.fingerprint:
            return GiveUp("this worker's ticket model differs from the job's (other "
                          "examples or model): start `foreperson worker "
                          "foreperson.tickets.job` with the same FOREPERSON_TICKETS_EXAMPLES "
                          "(and its _*_COLUMN settings) / FOREPERSON_TICKETS_MODEL as the "
                          "job, then `foreperson retry "
                          "--all-dead`")
        return None

    def _checked(self, task: Task) -> Any:
        """The model, refusing tasks made for another one."""
        error = self._mismatch(task)
        if error is not None:
            raise error
        return self.model

    # -- one ticket per call (a language model) --------------------------------------
    def _classify(self, task: Task) -> dict[str, Any]:
        """Category, confidence, priority and language of the ticket in ``task.payload``.

        Raises:
            GiveUp: the model's endpoint is not answering (:func:`endpoint_down`).
        """
        model = self._checked(task)
        try:
            verdict = model.classify(_text(task.payload))
        except Exception as exc:
            signal = _endpoint_down_signal(exc)
            if signal is None:
                raise
            raise signal from exc
        return _classified(verdict, task)

    def _draft(self, task: Task) -> dict[str, Any]:
        """A draft reply for the classified ticket.

        Raises:
            GiveUp: the model's endpoint is not answering (:func:`endpoint_down`).
        """
        record = current_task().store.get(task.depends_on[0])
        assert record is not None and record.result is not None
        classified = record.result
        model = self._checked(task)
        try:
            drafted = model.draft(_text(record.payload), classified["category"],
                                  classified.get("language", ""))
        except Exception as exc:
            signal = _endpoint_down_signal(exc)
            if signal is None:
                raise
            raise signal from exc
        return self._drafted(drafted)

    def _triage(self, task: Task) -> dict[str, Any]:
        """The ticket's output record: needs_human with the reasons, and the draft."""
        ctx = current_task()
        records = {d: ctx.store.get(d) for d in task.depends_on}
        self._checked(task)
        return self._record(task, {d: r for d, r in records.items() if r is not None})

    # -- batches (the offline model) --------------------------------------------------
    def _classify_batch(self, tasks: list[Task]) -> list[Any]:
        """:meth:`_classify` for a batch, in one pass of the model."""
        out: list[Any] = [self._mismatch(t) for t in tasks]
        todo = [i for i, error in enumerate(out) if error is None]
        found = self.model.classify_many([_text(tasks[i].payload) for i in todo])
        for i, verdict in zip(todo, found, strict=True):
            out[i] = _classified(verdict, tasks[i])
        return out

    def _draft_batch(self, tasks: list[Task]) -> list[Any]:
        """:meth:`_draft` for a batch, in one pass of the model (the classify records,
        text included, read in one query)."""
        records = current_batch().store.finished_among([t.depends_on[0] for t in tasks])
        out: list[Any] = [self._mismatch(t) for t in tasks]
        todo = [i for i, error in enumerate(out) if error is None]
        items = []
        for i in todo:
            record = records[tasks[i].depends_on[0]]
            classified = record.result or {}
            items.append((_text(record.payload), classified["category"],
                          classified.get("language", "")))
        for i, drafted in zip(todo, self.model.draft_many(items), strict=True):
            out[i] = self._drafted(drafted)
        return out

    def _triage_batch(self, tasks: list[Task]) -> list[Any]:
        """:meth:`_triage` for a batch: the dependencies read in one query."""
        store = current_batch().store
        records = store.finished_among([d for t in tasks for d in t.depends_on])
        out: list[Any] = []
        for task in tasks:
            error = self._mismatch(task)
            out.append(error if error is not None else self._record(task, records))
        return out

    @staticmethod
    def _drafted(drafted: dict[str, Any]) -> dict[str, Any]:
        return {"draft_reply": drafted["draft_reply"], "similarity": drafted.get("similarity"),
                "example": drafted.get("example", -1), "flags": list(drafted.get("flags", []))}

    def _record(self, task: Task, records: dict[str, Task]) -> dict[str, Any]:
        """The output record of ``task``'s ticket from its classify and draft records."""
        classify_id, draft_id = task.depends_on
        classified = records[classify_id].result or {}
        text = _text(records[classify_id].payload)
        drafted = records[draft_id].result or {}
        verdict = Classification(classified["category"], classified["confidence"],
                                 classified["priority"], classified.get("language", ""))
        settings = task.payload.get("settings") or {}
        threshold = self.threshold(settings or None)
        flags = drafted.get("flags", [])
        if settings.get("never_send"):       # the job's list, wherever this worker runs
            flags = [*flags, *never_send(drafted.get("draft_reply", ""),
                                         settings["never_send"])]
        triage = self.model.triage(text, verdict, flags, min_confidence=threshold)
        priority, why = raised_priority(verdict.priority, triage.reasons, self.raise_priority)
        if why:
            triage = replace(triage, reasons=(*triage.reasons, why))
        attempts = max([task.attempts] + [records[d].attempts for d in task.depends_on])
        return {"id": task.payload["ticket_id"], "category": verdict.category,
                "confidence": verdict.confidence, "priority": priority,
                "language": verdict.language, "needs_human": triage.needs_human,
                "reason": triage.reason, "reasons": list(triage.reasons),
                "draft_reply": drafted.get("draft_reply", ""), "attempts": attempts}


def _classified(verdict: Classification, task: Task) -> dict[str, Any]:
    return {"category": verdict.category, "confidence": round(verdict.confidence, 4),
            "priority": verdict.priority, "language": verdict.language}


def ticket_app(model: Any) -> App:
    """The ticket job's task functions for ``model`` (:meth:`TicketJob.app`)."""
    return TicketJob(model).app()

