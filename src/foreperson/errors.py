"""Every error foreperson raises, in one tree.

::

    ForepersonError
    ├── ConfigurationError          raised at construction or load; fix the input
    │   ├── InvalidPlan             unknown kind, unknown dependency, cycle, bad payload
    │   ├── InputError              a malformed input file (path, line)
    │   ├── MachineSpecError        a YAML state machine that cannot run (path, line,
    │   │                           column, and every problem of the file at once)
    │   └── MissingDependency       an optional extra is not installed
    ├── RunError                    raised while work runs
    │   ├── TaskFailed              an awaited task ended DEAD (its last error kept)
    │   ├── LeaseLost               this worker no longer holds the task's lease
    │   ├── ModelError              a model call failed; the SDK error is __cause__; no
    │   │   │                       key in its message (see :func:`redact`)
    │   │   └── EndpointUnavailable the model server timed out or refused N calls in a
    │   │                           row: calls fail fast until a trial call gets
    │   │                           through (defined in foreperson.models)
    │   ├── GuardError              a state machine's CEL expression failed on the run's data
    │   ├── OutputValidationError   the model's final answer never matched the agent's output_type
    │   ├── RecursionLimitExceeded  a team run took more steps than its backstop allows
    │   ├── AccessDenied            another user's (or an anonymous) run reached a pinned run
    │   │   │                       or worker (seed 001: tenant pinning)
    │   │   └── RunNotFound         no run of that id for this caller (missing or another
    │   │                           user's: the same to the caller; also a ConfigurationError)
    │   ├── RunBusy                 a durable run is owned by another live process
    │   └── JournalDivergence       a replay asked a step something else than was
    │                               recorded (defined in foreperson.journal)
    ├── UnknownStepVersion          a journal record in a format this foreperson cannot
    │                               read (defined in foreperson.journal)
    └── StoreError                  the task store failed; the driver error is __cause__

Signals raised *by user code* inside a task stand outside the tree, with imperative
names: :class:`Retry` (retry this task, optionally after a delay), :class:`RateLimited`
(a shared resource said "too many requests": back the resource off, keep the attempt)
and :class:`GiveUp` (do not retry: park the task DEAD now).

Outside the tree too, as a ``BaseException`` so that a tool's ``except Exception``
cannot swallow it: the agent layer's ``RunParked``, which carries a tool call waiting
for a human decision up to the outermost run (which then ends with stop reason
``"awaiting_approval"``, never raising it).

Also outside the tree: the test doubles of :mod:`foreperson.testing` fail with
``AssertionError`` subclasses (``UnexpectedModelCall``, ``UnusedReplies``), as failed test
expectations; ``Agent.run_sync`` called inside a running event loop raises
``RuntimeError``, as ``asyncio.run`` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "AccessDenied",
    "ConfigurationError",
    "ForepersonError",
    "GiveUp",
    "GuardError",
    "InputError",
    "InvalidPlan",
    "LeaseLost",
    "MachineSpecError",
    "MissingDependency",
    "RateLimited",
    "ModelError",
    "OutputValidationError",
    "RecursionLimitExceeded",
    "Retry",
    "RunBusy",
    "RunNotFound",
    "RunError",
    "SpecProblem",
    "StoreError",
    "TaskFailed",
    "describe",
    "first_error",
    "redact",
    "redact_url",
    "retryable_status",
    "url_secrets",
]


class ForepersonError(Exception):
    """Root of every error foreperson raises."""


class ConfigurationError(ForepersonError):
    """Something the user wrote (a task, a plan, a file, an option) cannot be used.

    Raised before any work starts, so nothing already accepted is lost.
    """


class InvalidPlan(ConfigurationError):
    """A task or a plan of tasks cannot be run as given.

    Attributes:
        task_id: the offending task's id, when one task is to blame.
        index: for a plan from a model (``foreperson.teams.decompose``), the 0-based
            index of the offending subtask, or None.
    """

    def __init__(self, message: str, *, task_id: str | None = None,
                 index: int | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id
        self.index = index


class InputError(ConfigurationError):
    """An input file is malformed.

    Attributes:
        path: the file.
        line: 1-based line number where the problem was found, or None.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a machine spec, where it is.

    Attributes:
        path: the file (or the ``source`` name given for text).
        line: 1-based line, or None when the problem has no place (an empty file).
        column: 1-based column, or None.
        message: what is wrong, and how to fix it.
    """

    path: str
    line: int | None
    column: int | None
    message: str

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.message}"


class MachineSpecError(ConfigurationError):
    """A state machine spec (YAML) cannot be loaded: it is reported whole, every problem
    of the file at once, each as ``file:line:column: what is wrong, and how to fix it``
    (STYLE 14: a machine spec fails at load, not mid-run).

    Attributes:
        problems: every problem found, in file order.
        path: the file of the first problem.
        line: the first problem's 1-based line, or None.
        column: the first problem's 1-based column, or None.
    """

    def __init__(self, problems: Sequence[SpecProblem]) -> None:
        if not problems:
            raise ValueError("MachineSpecError needs at least one problem")
        self.problems = list(problems)
        first = self.problems[0]
        self.path = first.path
        self.line = first.line
        self.column = first.column
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in {first.path}"
        super().__init__("\n".join([head, *(str(p) for p in self.problems)]))


class MissingDependency(ConfigurationError):
    """An optional extra is needed; the message names the ``pip install`` that fixes it."""


class RunError(ForepersonError):
    """Raised while work is running."""


class TaskFailed(RunError):
    """A task someone awaited (``await handle.result()``) ended DEAD.

    Attributes:
        task_id: the task.
        error: its last attempt's error, as recorded (the exception of another process
            survives only as this text).
        reason: why it is DEAD, a :class:`~foreperson.work.policy.Reason` code
            (``"retries_exhausted"``, ``"not_retryable"``, ``"dependency_dead"`` …).
    """

    def __init__(self, task_id: str, error: str | None, reason: str | None) -> None:
        why = {"dependency_dead": "a task it depends on is DEAD",
               "retries_exhausted": "every attempt failed",
               "not_retryable": "its error would repeat, so it was not retried"}.get(
                   reason or "", reason or "it was given up")
        super().__init__(redact(f"task {task_id} is DEAD ({why}): "
                                f"{error or 'no error recorded'}; `foreperson retry` puts it back"))
        self.task_id = task_id
        self.error = error
        self.reason = reason


class LeaseLost(RunError):
    """The task was reclaimed or finished by someone else; this worker's write was refused.

    Attributes:
        task_id: the task whose lease is gone.
    """

    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"task {task_id}: lease lost (the task was reclaimed after stale_after, "
            "or finished elsewhere); this worker's result was discarded"
        )
        self.task_id = task_id


def retryable_status(code: int) -> bool:
    """Whether a failure with HTTP status ``code`` could succeed on another attempt: 408
    (timeout), 409 (conflict), 425 (too early), 429 (too many requests) and every 5xx
    (RFC 9110 section 15); any other status no."""
    return code in (408, 409, 425, 429) or code >= 500


_REDACTED = "***"   # what redact() and redact_url() put in place of a secret

_URL_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/?#\"'<>]*@)")
"""``scheme://userinfo@``: the userinfo ends at the last ``@`` before the path (a
password with a raw ``@`` in it is still cut whole)."""

_TOKEN = r"[A-Za-z0-9+/_.~=-]"
_NAMED = r"(?:[A-Za-z0-9]+[_-])*"   # a compound name's head: "access_", "aws_secret_"
_SECRET_NAME = (r"(?:password|passwd|pwd|passphrase|secret|api[_-]?key|apikey|"
                r"access[_-]?key|token|credentials?)")
_SECRET_PATTERNS: tuple[re.Pattern[str], ...] = (
    # each replaces its group "secret" only; what leads up to it stays
    # a private key block, whole
    re.compile(r"(?P<secret>-----BEGIN [A-Z ]*PRIVATE KEY-----.*?"
               r"(?:-----END [A-Z ]*PRIVATE KEY-----|\Z))", re.S),
    # keys with a well-known prefix: OpenAI (sk-, sk-proj-), Anthropic (sk-ant-), xAI,
    # Groq, Hugging Face, GitHub, GitLab, Stripe, Google (AIza, ya29.), Slack, AWS key
    # ids (AKIA, ASIA), JSON web tokens
    re.compile(r"(?P<secret>\b(?:sk|xai)-[A-Za-z0-9_-]{16,})"),
    re.compile(r"(?P<secret>\b(?:hf|gsk|ghp|gho|ghu|ghs|ghr|github_pat|glpat)_"
               r"[A-Za-z0-9_]{16,})"),
    re.compile(r"(?P<secret>\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,})"),
    re.compile(r"(?P<secret>\bAIza[0-9A-Za-z_-]{30,})"),
    re.compile(r"(?P<secret>\bya29\.[0-9A-Za-z_-]{20,})"),
    re.compile(r"(?P<secret>\bxox[abeprs]-[A-Za-z0-9-]{10,}|\bxapp-[A-Za-z0-9-]{10,})"),
    re.compile(r"(?P<secret>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)"),
    re.compile(r"(?P<secret>\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
    # a credential in a URL's query: ?api_key=X, &token=X, &access_token=X, &sig=X
    re.compile(r"(?i)[?&;]" + _NAMED + r"(?:" + _SECRET_NAME[3:-1] +
               r"|auth|sig|signature)=(?P<secret>[^&#\s\"'<>]+)"),
    # an assignment: password=X, api_key=X, DB_PASSWORD = X (a DSN's key=value form, an
    # environment line); the value whatever its length
    re.compile(r"(?i)\b" + _NAMED + _SECRET_NAME +
               r"\s*=\s*(?P<secret>(?!\*\*\*)[^\s&;,'\"<>)\]}]+)"),
    # a quoted value of a secret's name: {"password": "X"}, {'api_key': 'X'}, token: "X"
    re.compile(r"(?i)\b" + _NAMED + r"(?:" + _SECRET_NAME[3:-1] + r"|authorization)"
               r"[\"']?\s*:\s*[\"'](?P<secret>[^\"'\n]{4,}?)(?=[\"'])"),
    # an Authorization header: "Authorization: Bearer X", "authorization=Basic X"
    re.compile(r"(?i)\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
               r"(?:bearer|basic|token|digest|apikey)\s+(?P<secret>[^\s\"',;]+)"),
    # an API key header: "x-api-key: X", "x-goog-api-key: X", "x-auth-token: X"
    re.compile(r"(?i)\b(?:x-)?(?:goog-)?(?:api-key|auth-token)\s*:\s*[\"']?"
               r"(?P<secret>[^\s\"',;]{8,})"),
    # a bare bearer token: 8+ characters with a digit, or 20+
    re.compile(rf"(?i)\bbearer\s+(?P<secret>(?={_TOKEN}*\d){_TOKEN}{{8,}}|{_TOKEN}{{20,}})"),
    # a long token (24+ characters, a digit among them) after a word that announces one:
    # "api key provided: X", "token X", "secret: X", "credentials X"
    re.compile(r"(?i)\b" + _NAMED + r"(?:bearer|token|api[_-]?key|apikey|key|secret|"
               r"password|passwd|authorization|credentials?)\b"
               r"(?:\s+(?:provided|given|supplied|used|is|was))?"
               r"[\"']?\s*[:=]?\s*[\"']?\s*(?:bearer\s+)?"
               rf"(?P<secret>(?={_TOKEN}*\d){_TOKEN}{{24,}})"),
)

_MIN_SECRET_LENGTH = 8   # shorter `secrets` are not searched for: "x" would blank out all


def _blank(match: re.Match[str]) -> str:
    """The match with its group ``secret`` replaced by ``***``."""
    start, end = match.span("secret")
    whole = match[0]
    offset = match.start()
    return whole[:start - offset] + _REDACTED + whole[end - offset:]


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo replaced: ``https://user:key@host/v1``
    becomes ``https://user:***@host/v1``; a userinfo without a password that is 20
    characters or more (a token used as the user name) becomes ``***``.

    Args:
        url: a URL, or any text holding URLs (each is redacted).

    Returns:
        The text with every URL's credentials replaced by ``***``; the rest
        unchanged.
    """
    def replace(match: re.Match[str]) -> str:
        userinfo = match["userinfo"][:-1]
        user, colon, _password = userinfo.partition(":")
        if colon:
            return f"{match['scheme']}{user}:{_REDACTED}@"
        if len(user) >= 20:
            return f"{match['scheme']}{_REDACTED}@"
        return match[0]

    return _URL_USERINFO.sub(replace, url)


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The credentials of ``url``'s userinfo, as :func:`redact` must look for them in what
    a server sends back: the password (or, without one, a user name of 20 characters or
    more: a token, as :func:`redact_url` takes it), both as written in the URL and
    percent-decoded (``PLANTED%21KEY`` reaches the server, and comes back in its
    error, as ``PLANTED!KEY``).

    Args:
        url: a URL, or None.

    Returns:
        The distinct secrets, as written first; ``()`` without credentials or for a
        URL that cannot be parsed.
    """
    from urllib.parse import unquote, urlsplit

    if not url:
        return ()
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return ()
    secret = password if password is not None else (
        user if user is not None and len(user) >= 20 else None)
    if not secret:
        return ()
    return tuple(dict.fromkeys((secret, unquote(secret))))


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with credentials replaced by ``***``, for messages, logs and anything
    stored (issue 21 item 6). Replaced:

    * each of ``secrets``, wherever it appears;
    * URL credentials: a userinfo password (:func:`redact_url`), and a query
      parameter named as a secret (``?api_key=``, ``&token=``, ``&access_token=``,
      ``&client_secret=``, ``&sig=``, ``&password=`` …);
    * assignments and quoted values of a secret's name (``password=X``,
      ``DB_PASSWORD=X``, ``{"api_key": "X"}``, ``token: 'X'``), whatever their length;
    * ``Authorization: Bearer|Basic X``, ``x-api-key: X``, and a bare ``Bearer X``
      (8+ characters with a digit, or 20+);
    * strings that look like keys: ``sk-…``, ``sk-ant-…``, ``sk-proj-…``, ``xai-…``,
      ``gsk_…``, ``hf_…``, ``ghp_…`` (and the other GitHub prefixes), ``glpat_…``,
      ``sk_live_…``, ``AIza…``, ``ya29.…``, ``xox?-…``, ``AKIA…``/``ASIA…``, JSON web
      tokens, private key blocks;
    * any token of 24 or more characters with a digit after a word that announces one
      (``key``, ``token``, ``secret``, ``password``, ``credentials``, ``api key
      provided:`` …).

    Left alone: ordinary prose ("forgot my password", "password authentication
    failed", "unknown key 'agents'", ``max_tokens=512``), task ids and URLs without
    credentials. A server that echoes the key it was sent back in its error body is
    the case it is made for; :class:`ModelError`, :class:`StoreError` and
    :class:`TaskFailed` apply it to their messages, the stores to every error they
    record. It is idempotent: redacting twice gives the same text.

    Args:
        text: the text to clean.
        secrets: exact strings to remove as well (the configured API key, a password);
            None and strings under 8 characters are ignored (a placeholder such
            as ``"x"`` would blank out every message).

    Returns:
        The cleaned text.
    """
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LENGTH},
                         key=len, reverse=True):
        text = text.replace(secret, _REDACTED)
    text = redact_url(text)
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(_blank, text)
    return text


def describe(exc: BaseException) -> str:
    """How an exception is written down wherever a person or a store will read it (a
    task's error, the journal, the audit log, a span): ``"<ExceptionType>: <message>"``
    passed through :func:`redact`, so a key a tool or a server echoed back in its message
    is stored as ``***`` (issue 21 item 6).

    Args:
        exc: the exception.

    Returns:
        One line or more of text; never raises.
    """
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the failure
        message = f"<{type(exc).__name__} whose message cannot be shown>"
    return redact(f"{type(exc).__name__}: {message}")


class ModelError(RunError):
    """A call to a model failed: an HTTP error, a timeout, a connection error, a reply
    that could not be read, or retries that ran out.

    The provider SDK's own exception, when there is one, is kept as ``__cause__``. The
    message is passed through :func:`redact` (no URL password, nothing that looks like an
    API key); the adapters also remove their configured key, from this message and from
    the SDK exception's.

    Attributes:
        model: the model's name (``"openai:gpt-4o"``), or None when unknown.
        status_code: the HTTP status of the failed response, or None (timeouts, connection
            errors, unreadable replies).
        retryable: whether another attempt could succeed (429, 5xx, timeouts: yes; other
            4xx: no). When not given: :func:`retryable_status` of ``status_code``, and
            yes without one (the rule of :func:`foreperson.retry.is_retryable`).
        retry_after_s: seconds the server asked us to wait (``Retry-After``), or None.
        attempts: how many attempts were made before this error was raised (1 without
            a retry wrapper).
    """

    def __init__(
        self,
        message: str,
        *,
        model: str | None = None,
        status_code: int | None = None,
        retryable: bool | None = None,
        retry_after_s: float | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(redact(message))
        self.model = model
        self.status_code = status_code
        self._retryable = retryable
        self.retry_after_s = retry_after_s
        self.attempts = attempts

    @property
    def retryable(self) -> bool:
        """Whether another attempt could succeed: the value given at construction, else
        :func:`foreperson.retry.is_retryable` applied to this error."""
        if self._retryable is not None:
            return self._retryable
        return self.status_code is None or retryable_status(self.status_code)


class GuardError(RunError):
    """A CEL guard or action value of a state machine failed on the run's data (an index
    out of range, a null, a type the load-time check could not foresee). The library's
    own error is kept as ``__cause__``.

    Attributes:
        expression: the CEL source.
        state: the state whose guard or action it is.
    """

    def __init__(self, message: str, *, expression: str, state: str) -> None:
        super().__init__(message)
        self.expression = expression
        self.state = state


class OutputValidationError(RunError):
    """The model's final answer did not match the agent's ``output_type``, even after the
    validation errors were sent back to it (``Limits.max_output_retries`` times).

    Attributes:
        text: the model's last answer, as written.
        errors: the validation errors of that answer, as text.
    """

    def __init__(self, message: str, *, text: str | None, errors: str) -> None:
        super().__init__(message)
        self.text = text
        self.errors = errors


class RecursionLimitExceeded(RunError):
    """A team run took more steps (decisions plus worker runs) than its
    ``recursion_limit``: the backstop behind the caps, which end a run with a result.

    Seed 004: "recursion_limit = 25 stays as the backstop, but it ends a run with an
    error, while the counter ends it with a result." Reaching it means the caps were set
    too loose for the limit (or a loop went undetected): lower ``max_specialist_calls``
    / ``max_turns``, or raise ``recursion_limit``.

    Attributes:
        agent: the team whose run stopped.
        run_id: its run.
        limit: the ``recursion_limit``.
    """

    def __init__(self, message: str, *, agent: str, run_id: str, limit: int) -> None:
        super().__init__(message)
        self.agent = agent
        self.run_id = run_id
        self.limit = limit


class AccessDenied(RunError):
    """A run reached something that belongs to another user (seed 001, tenant
    pinning): a durable run of another user (or of a user, from an anonymous caller)
    was to be run again, resumed, approved or read, a pinned worker was delegated to
    from another user's or an anonymous run, or a run nested in another named another
    user. Nothing was run, read or written.

    Attributes:
        user_id: who asked (None: anonymous).
        owner: the user it belongs to (None: anonymous).
        what: what was reached (``"run r-1"``, ``"agent 'poet'"``).

    Args:
        what: as the attribute.
        user_id: as the attribute.
        owner: as the attribute.
        action: what was refused (``"run"``, ``"resume"``, ``"read"``...).
        message: the whole message instead of the default one naming the owner.
    """

    def __init__(self, what: str, *, user_id: str | None, owner: str | None,
                 action: str = "reach", message: str | None = None) -> None:
        def who(user: str | None) -> str:
            return "an anonymous caller" if user is None else f"user {user!r}"

        pinned = "no user (an anonymous run)" if owner is None else f"user {owner!r}"
        super().__init__(message or (
            f"{what} belongs to {pinned}; {who(user_id)} cannot {action} it: pass the "
            "user_id it belongs to (runs and workers stay with the user who started them)"))
        self.user_id = user_id
        self.owner = owner
        self.what = what


class RunNotFound(AccessDenied, ConfigurationError):
    """There is no run of this id for this caller: it does not exist, or it belongs to
    another user (or to a user, asked by an anonymous caller). The two read the same
    and the owner is never named (seed 001, tenant pinning: a caller learns nothing of
    the runs that are not its own). Nothing was run, read or written. It is both an
    :class:`AccessDenied` and a :class:`ConfigurationError`, so code catching either
    keeps working.

    Attributes:
        run_id: the run asked for.
        user_id: who asked (None: anonymous).
        owner: always None (not told).
        what: ``"run <id>"``.
    """

    def __init__(self, run_id: str, *, user_id: str | None) -> None:
        who = "an anonymous caller" if user_id is None else f"user {user_id!r}"
        Exception.__init__(
            self, f"there is no run {run_id} for {who}: check the run id and the user_id "
                  "(a run is reached only by the user it was started for)")
        self.run_id = run_id
        self.user_id = user_id
        self.owner = None
        self.what = f"run {run_id}"


class RunBusy(RunError):
    """A durable run is owned by another live process (its lease has not lapsed), so it
    cannot be run or resumed here now.

    Attributes:
        run_id: the run.
        owner: the process that owns it (``host:pid:nonce``).
        expires_in_s: seconds until its lease lapses unless renewed, or None when not
            known.
    """

    def __init__(self, run_id: str, owner: str, expires_in_s: float | None) -> None:
        lapse = "" if expires_in_s is None else f" (its lease lapses in {expires_in_s:.0f} s)"
        super().__init__(
            f"run {run_id} is being run by {owner}{lapse}: wait for it to end, or resume it "
            "once that process is gone")
        self.run_id = run_id
        self.owner = owner
        self.expires_in_s = expires_in_s


class StoreError(ForepersonError):
    """The task store failed. The driver's own exception is kept as ``__cause__``.

    Attributes:
        transient: True when trying again may work (a lost connection, a locked or full
            database): a running supervisor keeps its results and retries. False for
            what would fail the same way again (a bad statement, a closed store): the
            run stops with this error.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(redact(message))
        self.transient = transient


class Retry(Exception):  # noqa: N818 - a signal, named as an imperative
    """Raise inside a task to ask for another attempt.

    Args:
        reason: why, recorded with the attempt.
        after_s: seconds to wait before the next attempt; None uses the backoff.
    """

    def __init__(self, reason: str = "retry requested", *, after_s: float | None = None) -> None:
        super().__init__(reason)
        self.after_s = after_s


class GiveUp(Exception):  # noqa: N818 - a signal, named as an imperative
    """Raise inside a task to park it DEAD at once, with ``reason``, without retrying."""


class RateLimited(Retry):  # noqa: N818 - a signal, named as what happened
    """Raise inside a task when a shared resource refused the call as too frequent
    (HTTP 429): a signal, like :class:`~foreperson.errors.Retry`.

    With a store that limits resources across machines
    (:class:`~foreperson.work.stores.postgres.PostgresStore`), the attempt is given back
    (not counted against ``max_attempts``: the task did nothing wrong) and the resource
    is closed to every worker for ``after_s`` seconds, so nobody keeps hammering it.
    Other stores treat it as :class:`~foreperson.errors.Retry` (a counted attempt).
    Seed 000: "retrying instantly makes it worse".

    Args:
        resource: the resource that refused, as tasks name it in ``locks``; None = every
            rate-limited resource the task uses.
        after_s: seconds to keep off it (the ``Retry-After``); None = the backoff.
    """

    def __init__(self, resource: str | None = None, *, after_s: float | None = None) -> None:
        super().__init__(f"rate limited by {resource or 'a shared resource'}", after_s=after_s)
        self.resource = resource


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception that ended a task group: the first leaf of ``group`` (nested groups
    walked depth first) that is not a cancellation, else the first leaf, else ``group``
    itself. Cancellations come last because they are the consequence, not the cause."""
    import anyio

    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            leaves.append(exc)

    walk(group)
    cancelled = anyio.get_cancelled_exc_class()
    for exc in leaves:
        if not isinstance(exc, cancelled):
            return exc
    return leaves[0] if leaves else group
