"""Structured output: an agent triages support tickets into a pydantic model; an answer
that does not match the schema goes back to the model with its errors.

Runs offline with a function model; pass ``--model gpt-4o-mini`` (OPENAI_API_KEY),
``--model claude-opus-4-7`` (ANTHROPIC_API_KEY) or a local server with
``--model openai:llama3.1 --base-url http://localhost:11434/v1``.

    python examples/agent_structured.py [--model NAME] [--base-url URL]
"""

from __future__ import annotations

import argparse
from typing import Literal

from pydantic import BaseModel, Field

from foreperson.agents import Agent
from foreperson.models import infer_model
from foreperson.testing import FunctionModel


class Triage(BaseModel):
    """How to handle one ticket."""

    category: Literal["billing", "bug", "account", "other"]
    urgent: bool
    summary: str = Field(max_length=80)


def keyword_triage(messages, params) -> str:
    """An offline stand-in for a model: keywords decide, and it answers in JSON."""
    ticket = messages[-1].content.lower()
    category = ("billing" if "charge" in ticket or "invoice" in ticket
                else "bug" if "crash" in ticket or "error" in ticket
                else "account" if "password" in ticket else "other")
    urgent = "urgent" in ticket or "twice" in ticket
    return Triage(category=category, urgent=urgent, summary=ticket[:80]).model_dump_json()


TICKETS = [
    "I was charged twice for my subscription!",
    "The app crashes when I open settings.",
    "How do I reset my password?",
]


def main(model_name: str | None, base_url: str | None) -> None:
    model = infer_model(model_name, base_url) if model_name else FunctionModel(keyword_triage)
    agent = Agent(
        "Triage the customer's ticket: pick a category, say whether it is urgent, "
        "summarise it in one line.",
        model=model,
        output_type=Triage,
        name="triage",
    )
    for ticket in TICKETS:
        result = agent.run_sync(ticket)
        triage: Triage = result.output
        print(f"{triage.category:8} urgent={triage.urgent!s:5}  {triage.summary}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Structured output with an agent.")
    parser.add_argument("--model", help="a model string; default: an offline function model")
    parser.add_argument("--base-url", help="an OpenAI-compatible server, e.g. Ollama's")
    args = parser.parse_args()
    main(args.model, args.base_url)
