"""Open sets of names with a documented meaning: the stop reasons of a run and the kinds
of audit entries. The agent layer registers its own; the layers above add theirs (the
teams layer: ``"cap"``, ``"loop"``, ``"route"``), so a typo fails loudly instead of
reaching a result or the audit log."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

from ..errors import ConfigurationError

__all__ = ["Vocabulary"]


class Vocabulary:
    """A registry of names, each with the sentence that says what it means.

    Example::

        from foreperson.agents import STOP_REASONS

        STOP_REASONS.register("cap", "a team cap (specialist calls, fan-out) was reached")
        ctx.end("cap", detail="6 specialist calls")

    Args:
        what: what the names are, for error messages (``"stop reason"``).
        known: the names known from the start, with their meanings.
    """

    def __init__(self, what: str, known: Mapping[str, str]) -> None:
        self.what = what
        self._meanings: dict[str, str] = dict(known)
        self._lock = threading.Lock()

    def register(self, name: str, meaning: str) -> str:
        """Add a name (registering it again with the same meaning does nothing).

        Args:
            name: the new name, e.g. ``"cap"``.
            meaning: one sentence saying when it is used; shown in docs and errors.

        Returns:
            ``name``.

        Raises:
            ConfigurationError: ``name`` or ``meaning`` is empty, or ``name`` is already
                registered with another meaning (two layers would disagree on it).
        """
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"a {self.what} must be a non-empty string, got {name!r}")
        if not isinstance(meaning, str) or not meaning.strip():
            raise ConfigurationError(f"{self.what} {name!r}: give a meaning (one sentence)")
        with self._lock:
            earlier = self._meanings.get(name)
            if earlier is not None and earlier != meaning:
                raise ConfigurationError(
                    f"{self.what} {name!r} is already registered as {earlier!r}; "
                    "pick another name")
            self._meanings[name] = meaning
        return name

    def check(self, name: str) -> str:
        """``name`` when it is registered.

        Raises:
            ConfigurationError: it is not; the message lists the known names.
        """
        if name in self._meanings:
            return name
        raise ConfigurationError(
            f"unknown {self.what} {name!r}; use one of {sorted(self._meanings)} or "
            f"register it first (.register(name, meaning))")

    def meaning(self, name: str) -> str:
        """What ``name`` means.

        Raises:
            KeyError: ``name`` is not registered.
        """
        return self._meanings[name]

    def __contains__(self, name: object) -> bool:
        return name in self._meanings

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._meanings))

    def __len__(self) -> int:
        return len(self._meanings)

    def __repr__(self) -> str:
        return f"Vocabulary({self.what!r}, {sorted(self._meanings)})"
