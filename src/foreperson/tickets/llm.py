"""The ticket job with a language model: one agent per stage.

Classification is a structured output whose ``category`` is a closed set (the labels of
the examples), so the model cannot invent a category; the draft is plain text, steered
by the nearest answered example; triage keeps the offline rules, fed with the model's
confidence. A reply that does not fit the schema is sent back to the model with the
errors and, if it still does not fit, fails the task without retries (it would fail
the same way again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model

from .drafts import borrowed_claims, fill_placeholders, informal_reply, loose_ends
from .language import detect_language, dominant_language
from .model import Classification, Example, Triage, triage
from .triage import draft_promises

__all__ = ["LlmTicketModel"]


class LlmTicketModel:
    """Classify and draft with a model; same interface as
    :class:`~foreperson.tickets.model.TicketModel`.

    Args:
        model: a model string (``gpt-4o-mini``, ``claude-…``, ``openai:NAME``) or a
            :class:`~foreperson.models.Model`.
        examples: labelled examples: their labels are the allowed categories, their
            answers steer the drafts.
        base_url: an OpenAI-compatible server (vLLM, llama.cpp, Ollama).
        min_confidence: below this self-reported confidence (0..1) a human is needed.
        timeout_s: seconds one request to the model may take (default
            :data:`~foreperson.models.DEFAULT_TIMEOUT_S`, 30); ignored for a
            :class:`~foreperson.models.Model` given as is.

    Raises:
        ConfigurationError / MissingDependency: unknown model, no API key, missing SDK,
            a ``timeout_s`` that is not a positive number (raised here, before any task
            runs).
    """

    def __init__(self, model: Any, examples: Sequence[Example], *,
                 base_url: str | None = None, min_confidence: float | None = None,
                 timeout_s: float | None = None) -> None:
        from ..agents import Agent
        from ..models import DEFAULT_TIMEOUT_S, infer_model

        self.examples = list(examples)
        self.model_name = model if isinstance(model, str) else getattr(model, "name", repr(model))
        self.labels = sorted({e.category for e in self.examples})
        self.min_confidence = 0.5 if min_confidence is None else min_confidence
        priorities = sorted({e.priority for e in self.examples if e.priority}) or [
            "high", "low", "medium"]
        self.output_type: type[BaseModel] = create_model(
            "TicketClassification",
            category=(Literal[tuple(self.labels)], Field(description="one of the categories")),
            priority=(Literal[tuple(priorities)], Field(description="how urgent")),
            confidence=(float, Field(ge=0.0, le=1.0, description="0..1, how sure you are")),
        )
        if isinstance(model, str):
            chosen = infer_model(model, base_url, timeout_s=(
                DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s))
        else:
            chosen = model
        self.classifier = Agent(
            "You classify customer support tickets. Choose the single best category from: "
            + ", ".join(self.labels) + f". Priority is one of: {', '.join(priorities)}. "
            "Give your confidence between 0 and 1.",
            model=chosen, output_type=self.output_type, name="classifier")
        self.drafter: Agent[Any] = Agent(
            "You draft short, polite replies to customer support tickets, in the language "
            "of the ticket. Do not promise what you cannot check. Reply with the draft only.",
            model=chosen, name="drafter")
        # a short ticket keeps the examples' dominant language (none given: English)
        self.language = dominant_language(e.language for e in self.examples)
        self._nearest = None
        if any(e.answer for e in self.examples):
            from .model import TicketModel
            self._nearest = TicketModel(self.examples, templates=False)

    def classify(self, text: str) -> Classification:
        """Category (one of :attr:`labels`), confidence and priority, from the model."""
        out: Any = self.classifier.run_sync(text).output
        return Classification(out.category, float(out.confidence), out.priority,
                              detect_language(text, self.language)[0])

    def draft(self, text: str, category: str, language: str = "") -> dict[str, Any]:
        """A draft reply written by the model, shown the nearest answered example, its
        template slots filled from the ticket (:func:`~.drafts.fill_placeholders`);
        ``flags`` lists the slots left, what it promises (money, a time, contact) and
        what it claims unchecked (work under way, a page it does not give),
        for a human to confirm."""
        hint = ""
        if self._nearest is not None:
            nearest = self._nearest.draft(text, category, language)
            hint = ("\n\nA reply we sent to a similar ticket, for tone (its order numbers "
                    "and names belong to another customer):\n" + nearest["draft_reply"])
        reply = self.drafter.run_sync(f"Category: {category}\nTicket:\n{text}{hint}")
        # a model that imitates a templated answer writes its slots too: fill them from
        # the ticket, flag the rest
        draft, unfilled = fill_placeholders(str(reply.output).strip(), text)
        flags = ([f"draft has placeholders to fill in ({', '.join(unfilled[:3])})"]
                 if unfilled else [])
        return {"draft_reply": draft, "similarity": None, "example": -1,
                "flags": (flags + draft_promises(draft) + borrowed_claims(draft)
                          + informal_reply(draft, text, language
                                           or detect_language(text, self.language)[0])
                          + loose_ends(draft, text))}

    def triage(self, text: str, result: Classification, draft_flags: Sequence[str] = (),
               *, min_confidence: float | None = None) -> Triage:
        """The offline triage rules, with the model's confidence (``min_confidence``
        overrides the model's threshold, 0..1)."""
        threshold = self.min_confidence if min_confidence is None else min_confidence
        return triage(text, result, threshold, draft_flags)
