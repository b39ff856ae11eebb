"""Issue 20 item 2: every routing decision is journaled and checked on replay, whoever
made it (a model, ``decide=``, a pipeline's order, a parallel's roster), and a worker's
instructions are a digest of their own: editing a worker a parked run never used does
not block its resume, editing one it used names it."""

from __future__ import annotations

import pytest

from foreperson.agents import Agent, Approval, Guards, tool
from foreperson.journal import JournalDivergence
from foreperson.models import ToolCall, ToolReturn
from foreperson.runtime import InMemoryRuntime
from foreperson.teams import FINISH, RouteDecision, Team
from foreperson.testing import FunctionModel


def ask_later(call, ctx):
    return Approval.pending()


def last_result(messages) -> str | None:
    last = messages[-1]
    return last.content if isinstance(last, ToolReturn) else None


class Ledger:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def refund(self, order: str) -> str:
        """Refund an order.

        Args:
            order: the order id.
        """
        self.calls.append(order)
        return f"refunded {order}"


def clerk(ledger: Ledger) -> Agent:
    """A worker whose refund waits for a human decision."""
    def reply(messages, params):
        result = last_result(messages)
        return f"done: {result}" if result is not None else ToolCall("refund", {"order": "A-7"})

    return Agent("Handle refunds.", model=FunctionModel(reply), name="clerk",
                 tools=[tool(ledger.refund, name="refund")],
                 guards=Guards(approval=ask_later, approval_required={"refund"}))


def answering(name: str, instructions: str | None = None, ran: list[str] | None = None
              ) -> Agent:
    def reply(messages, params):
        if ran is not None:
            ran.append(name)
        return f"{name} answered"

    return Agent(instructions or f"You are {name}.", model=FunctionModel(reply), name=name)


async def park(team: Agent, runtime: InMemoryRuntime, ledger: Ledger) -> None:
    parked = await team.run("refund A-7 and check the logs", runtime=runtime, run_id="t1")
    assert parked.stop_reason == "awaiting_approval" and ledger.calls == []
    runtime.approve("t1", parked.pending[0].call_id)


# --- code-decided routing ------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_routing_rule_changed_before_the_resume_is_a_divergence_naming_both_choices():
    runtime, ledger, ran = InMemoryRuntime(), Ledger(), []

    def team(first: str) -> Agent:
        return Team.router(workers={"clerk": clerk(ledger), "logs": answering("logs", ran=ran)},
                           decide=lambda s: first if s.specialist_calls == 0 else FINISH,
                           name="desk")

    await park(team("clerk"), runtime, ledger)
    with pytest.raises(JournalDivergence) as diverged:
        await team("logs").resume("t1", runtime=runtime)
    assert diverged.value.key.endswith("/route:1")
    assert 'next: recorded "clerk", now "logs"' in str(diverged.value)
    assert ledger.calls == [] and ran == []           # nothing ran on the other branch
    done = await team("clerk").resume("t1", runtime=runtime)      # the rule put back
    assert done.completed and ledger.calls == ["A-7"]


@pytest.mark.anyio
async def test_a_pipeline_whose_order_changed_does_not_run_the_approved_call_elsewhere():
    runtime, ledger, ran = InMemoryRuntime(), Ledger(), []
    await park(Team.pipeline([clerk(ledger), answering("logs", ran=ran)], name="line"),
               runtime, ledger)
    reordered = Team.pipeline([answering("logs", ran=ran), clerk(ledger)], name="line")
    with pytest.raises(JournalDivergence, match='next: recorded "clerk", now "logs"'):
        await reordered.resume("t1", runtime=runtime)
    assert ledger.calls == [] and ran == []


@pytest.mark.anyio
async def test_a_parallel_whose_roster_changed_is_a_divergence():
    runtime, ledger = InMemoryRuntime(), Ledger()
    await park(Team.parallel([clerk(ledger), answering("logs")], name="fan"), runtime, ledger)
    changed = Team.parallel([clerk(ledger), answering("metrics")], name="fan")
    with pytest.raises(JournalDivergence, match="route:fan-out"):
        await changed.resume("t1", runtime=runtime)
    assert ledger.calls == []


# --- a worker's instructions are their own digest --------------------------------------------


def supervisor(ledger: Ledger, *, writer: str, logs: str) -> Agent:
    def lead(messages, params):
        if last_result(messages) is None:
            return [ToolCall("delegate", {"worker": "logs", "instructions": "check"}),
                    ToolCall("delegate", {"worker": "clerk", "instructions": "refund A-7"})]
        return "all done"

    return Team.supervisor(
        workers={"clerk": clerk(ledger), "logs": answering("logs", logs),
                 "writer": answering("writer", writer)},
        instructions="Lead.", model=FunctionModel(lead), name="lead")


@pytest.mark.anyio
async def test_editing_a_worker_the_parked_run_never_used_does_not_block_its_resume():
    runtime, ledger = InMemoryRuntime(), Ledger()
    await park(supervisor(ledger, writer="Write.", logs="Read logs."), runtime, ledger)
    edited = supervisor(ledger, writer="Write short, friendly replies.", logs="Read logs.")
    done = await edited.resume("t1", runtime=runtime)
    assert done.completed and done.text == "all done" and ledger.calls == ["A-7"]


@pytest.mark.anyio
async def test_editing_a_worker_the_parked_run_used_is_a_divergence_naming_it():
    runtime, ledger = InMemoryRuntime(), Ledger()
    await park(supervisor(ledger, writer="Write.", logs="Read logs."), runtime, ledger)
    edited = supervisor(ledger, writer="Write.", logs="Read the logs of the last 24 h.")
    with pytest.raises(JournalDivergence, match="the instructions of worker 'logs' changed"):
        await edited.resume("t1", runtime=runtime)
    assert ledger.calls == []


@pytest.mark.anyio
async def test_a_model_routed_router_resumes_after_an_unused_worker_is_edited():
    runtime, ledger = InMemoryRuntime(), Ledger()

    def decide(messages, params):
        first = not any((getattr(m, "text", None) or "").startswith("[clerk]")
                        for m in messages)
        return RouteDecision(next="clerk" if first else FINISH, reasoning="refund first")

    def team(logs: str) -> Agent:
        return Team.router(workers={"clerk": clerk(ledger), "logs": answering("logs", logs)},
                           model=FunctionModel(decide), name="desk")

    await park(team("Read logs."), runtime, ledger)
    done = await team("Read the logs of the last 24 h.").resume("t1", runtime=runtime)
    assert done.completed and ledger.calls == ["A-7"]
