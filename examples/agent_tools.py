"""An agent with tools and guards: two tools called in one turn run in parallel, a human
approves refunds, everything lands in an audit log, and the run streams its events.

Runs offline with a scripted model; pass ``--model gpt-4o-mini`` (and export
OPENAI_API_KEY) or ``--model claude-opus-4-7`` (ANTHROPIC_API_KEY) to use a real one.

    python examples/agent_tools.py [--model NAME] [--base-url URL]
"""

from __future__ import annotations

import argparse

import anyio

from foreperson.agents import Agent, Approval, Guards, Limits, MemoryAuditLog, RunContext
from foreperson.models import Model, ToolCall, infer_model
from foreperson.testing import ScriptedModel

ORDERS = {"A-100": {"status": "shipped", "total_eur": 42.0}, "A-101": {"status": "lost"}}


async def order_status(order_id: str) -> dict:
    """Look up an order.

    Args:
        order_id: the order number, like A-100.
    """
    await anyio.sleep(0.2)  # a slow back-office API
    return ORDERS.get(order_id, {"status": "unknown"})


def refund(ctx: RunContext, order_id: str, amount_eur: float) -> str:
    """Refund part or all of an order.

    Args:
        order_id: the order number.
        amount_eur: how much to refund, in euros.
    """
    return f"refunded {amount_eur:.2f} EUR on {order_id} for {ctx.user_id}"


def approve_small_refunds(call: ToolCall, ctx: RunContext) -> Approval:
    """Stands in for a human: refunds above 50 EUR are cut to 50."""
    args = call.arguments_dict()
    if args.get("amount_eur", 0) > 50:
        return Approval.edit({**args, "amount_eur": 50.0})
    return Approval.approve()


def scripted() -> Model:
    return ScriptedModel([
        [ToolCall("order_status", {"order_id": "A-100"}),
         ToolCall("order_status", {"order_id": "A-101"})],
        ToolCall("refund", {"order_id": "A-101", "amount_eur": 80.0}),
        "A-100 has shipped. A-101 was lost: I refunded 50.00 EUR.",
    ])


async def main(model_name: str | None, base_url: str | None) -> None:
    model = infer_model(model_name, base_url) if model_name else scripted()
    audit = MemoryAuditLog()
    agent = Agent(
        "You help customers with their orders. Use the tools; refund lost orders.",
        model=model,
        tools=[order_status, refund],
        name="support",
        guards=Guards(
            limits=Limits(max_turns=6, max_tool_calls=6),
            approval=approve_small_refunds,
            approval_required={"refund"},
            audit_log=audit,
        ),
    )
    async for event in agent.stream("Where are orders A-100 and A-101?", user_id="cust-7"):
        if event.kind == "tool_call":
            print(f"-> {event.call.name}({event.call.arguments})")
        elif event.kind == "tool_result":
            print(f"<- {event.result.content}  [{event.duration_s:.2f} s]")
        elif event.kind == "final":
            result = event.result
            print(f"== {result.stop_reason}: {result.output}")
            print(f"   usage: {result.usage}")
    print(f"audit log: {len(audit.entries)} entries "
          f"({', '.join(e.kind for e in audit.entries)})")
    await model.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An agent with tools and guards.")
    parser.add_argument("--model", help="a model string; default: an offline scripted model")
    parser.add_argument("--base-url", help="an OpenAI-compatible server, e.g. Ollama's")
    args = parser.parse_args()
    anyio.run(main, args.model, args.base_url)
