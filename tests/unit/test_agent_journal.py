"""The agent layer's seams: every step through an injected step runner (journaled:
replayed without calling the model or the tool again, first write wins, divergence
named), deterministic step keys, an injected clock and id source, nested runs that count
usage once and stream their events live, open stop reasons."""

from __future__ import annotations

import ast
import json
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from foreperson.agents import (
    STOP_REASONS,
    Agent,
    Approval,
    FinalEvent,
    Guards,
    Limits,
    MemoryAuditLog,
    ModelCallEvent,
    RunContext,
    RunOptions,
    ToolResultEvent,
    tool,
)
from foreperson.agents.steps import InlineSteps, JournaledSteps, StepSpec
from foreperson.errors import ConfigurationError, ModelError
from foreperson.journal import Journal, JournalDivergence, Step
from foreperson.models import ModelResponse, ToolCall, ToolReturn, Usage
from foreperson.testing import FunctionModel, ManualClock, ScriptedModel
from foreperson.work import MemoryStore

AGENTS_SRC = Path(__file__).resolve().parents[2] / "src" / "foreperson" / "agents"


class Crash(BaseException):
    """Stands in for the process dying mid-run: no layer catches it."""


class Counted:
    """A tool that adds and counts its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, a: int, b: int) -> int:
        self.calls.append((a, b))
        return a + b


def sum_agent(model, adder: Counted, **kwargs) -> Agent:
    return Agent("Do sums with the tool.", model=model, name="calc",
                 tools=[tool(adder, name="add")], **kwargs)


def answers_with_the_sum(messages, params):
    last = messages[-1]
    if isinstance(last, ToolReturn):
        return f"the sum is {last.content}"
    return ToolCall("add", {"a": 2, "b": 3})


def journaled(store: MemoryStore | None = None, **changes) -> RunOptions:
    return RunOptions(steps=JournaledSteps(store if store is not None else MemoryStore()),
                      **changes)


# --- replay -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_journaled_run_replays_without_calling_the_model_or_the_tool() -> None:
    store = MemoryStore()
    options = journaled(store)
    adder = Counted()
    model = FunctionModel(answers_with_the_sum)
    agent = sum_agent(model, adder)

    first = await agent.run("2 + 3?", run_id="run-1", options=options)
    events = [e async for e in agent.stream("2 + 3?", run_id="run-1", options=options)]

    assert first.output == "the sum is 5"
    assert len(model.calls) == 2 and adder.calls == [(2, 3)]   # nothing ran twice
    again = events[-1]
    assert isinstance(again, FinalEvent)
    assert again.result.output == first.output
    assert again.result.messages == first.messages
    assert again.result.usage == first.usage
    replayed = [e for e in events if isinstance(e, ModelCallEvent | ToolResultEvent)]
    assert len(replayed) == 3 and all(e.replayed for e in replayed)
    steps = store.list_steps("run-1")
    assert [(s.key, s.kind) for s in steps] == [
        ("agent:calc/turn:1/model", "model_call"),
        ("agent:calc/turn:1/tool:1", "tool_call"),
        ("agent:calc/turn:2/model", "model_call"),
    ]
    for step in steps:
        json.dumps(step.result)   # every recorded result is JSON


@pytest.mark.anyio
async def test_a_crashed_run_replays_its_finished_steps_and_runs_only_the_rest() -> None:
    store = MemoryStore()
    adder = Counted()
    crashed = ScriptedModel([ToolCall("add", {"a": 2, "b": 3}), ModelError("connection reset")])
    with pytest.raises(ModelError):
        await sum_agent(crashed, adder).run("2 + 3?", run_id="run-1", options=journaled(store))
    assert [s.key for s in store.list_steps("run-1")] == [
        "agent:calc/turn:1/model", "agent:calc/turn:1/tool:1"]   # the failed call: not recorded

    resumed = ScriptedModel(["the sum is 5"])
    with resumed:
        result = await sum_agent(resumed, adder).run("2 + 3?", run_id="run-1",
                                                     options=journaled(store))
    assert result.output == "the sum is 5"
    assert adder.calls == [(2, 3)]                       # the finished tool call did not run again
    assert len(resumed.calls) == 1                       # only the unfinished model call ran
    assert resumed.calls[0].messages[-1] == ToolReturn("call_1", "add", "5")


@pytest.mark.anyio
async def test_parallel_tool_calls_are_keyed_by_call_order_not_completion_order() -> None:
    second_done = anyio.Event()

    async def slow_first(label: str) -> str:
        if label == "first":
            await second_done.wait()    # finishes last
        else:
            second_done.set()
        return f"done {label}"

    store = MemoryStore()
    model = ScriptedModel([
        [ToolCall("slow_first", {"label": "first"}), ToolCall("slow_first", {"label": "second"})],
        "both done",
    ])
    agent = Agent("x", model=model, tools=[slow_first], name="a")
    with anyio.fail_after(5):
        await agent.run("go", run_id="r", options=journaled(store))
    assert store.get_step("r", "agent:a/turn:1/tool:1").result["content"] == "done first"
    assert store.get_step("r", "agent:a/turn:1/tool:2").result["content"] == "done second"


@pytest.mark.anyio
async def test_a_replay_that_asks_something_else_names_the_step_that_diverged() -> None:
    store = MemoryStore()
    agent = sum_agent(FunctionModel(answers_with_the_sum), Counted())
    await agent.run("2 + 3?", run_id="run-1", options=journaled(store))
    with pytest.raises(JournalDivergence, match=r"step 'agent:calc/turn:1/model' diverged") as info:
        await agent.run("2 + 4?", run_id="run-1", options=journaled(store))
    assert info.value.run_id == "run-1" and info.value.key == "agent:calc/turn:1/model"


class Triage(BaseModel):
    category: str
    priority: int


@pytest.mark.anyio
async def test_a_structured_output_replays_as_the_validated_object() -> None:
    store = MemoryStore()
    model = ScriptedModel([Triage(category="billing", priority=2)])
    agent = Agent("Triage.", model=model, output_type=Triage)
    first = await agent.run("charged twice", run_id="t", options=journaled(store))
    again = await agent.run("charged twice", run_id="t", options=journaled(store))
    assert again.output == first.output == Triage(category="billing", priority=2)
    assert len(model.calls) == 1


@pytest.mark.anyio
async def test_an_approval_is_a_journaled_step_and_is_not_asked_again() -> None:
    asked: list[dict] = []

    def human(call, ctx):
        asked.append(call.arguments_dict())
        return Approval.edit({"a": 1, "b": 1})

    store = MemoryStore()
    adder = Counted()
    model = FunctionModel(answers_with_the_sum)
    agent = sum_agent(model, adder, guards=Guards(approval=human))
    first = await agent.run("2 + 3?", run_id="r", options=journaled(store))
    again = await agent.run("2 + 3?", run_id="r", options=journaled(store))
    assert first.output == again.output == "the sum is 2"   # the edit applied, both times
    assert asked == [{"a": 2, "b": 3}] and adder.calls == [(1, 1)]
    approval = store.get_step("r", "agent:calc/turn:1/tool:1/approval")
    assert approval is not None and approval.kind == "approval"
    assert approval.result["decision"] == "edit"


class HidingJournal:
    """A journal whose reads miss: another process recorded the step meanwhile."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def get_step(self, run_id: str, key: str) -> Step | None:
        return None

    def put_step(self, step: Step) -> Step:
        return self.store.put_step(step)

    def list_steps(self, run_id: str) -> list[Step]:
        return []


@pytest.mark.anyio
async def test_the_first_recorded_result_wins_and_a_raising_step_is_not_recorded() -> None:
    store = MemoryStore()
    store.put_step(Step("r", "k", "custom", _digest({"q": 1}), {"answer": "theirs"}))
    journal = HidingJournal(store)
    assert isinstance(journal, Journal)
    runner = JournaledSteps(journal)
    executed: list[str] = []

    async def ours() -> dict:
        executed.append("ours")
        return {"answer": "ours"}

    spec = StepSpec("r", "k", "custom", lambda: {"q": 1}, _json_codec())
    outcome = await runner.run(spec, ours)
    assert outcome.value == {"answer": "theirs"} and executed == ["ours"]

    async def fails() -> dict:
        raise LookupError("upstream down")

    with pytest.raises(LookupError):
        await JournaledSteps(store).run(StepSpec("r", "k2", "custom", lambda: {}, _json_codec()),
                                        fails)
    assert store.get_step("r", "k2") is None


def _digest(request):
    from foreperson.journal import request_digest

    return request_digest(request)


def _json_codec():
    from foreperson.agents.steps import JSON_CODEC

    return JSON_CODEC


@pytest.mark.anyio
async def test_the_default_runner_records_nothing() -> None:
    ran: list[int] = []

    async def execute() -> int:
        ran.append(1)
        return 7

    outcome = await InlineSteps().run(StepSpec("r", "k", "custom", _unused, _json_codec()),
                                      execute)
    assert (outcome.value, outcome.replayed, ran) == (7, False, [1])


def _unused():
    raise AssertionError("the inline runner must not build the request")


# --- custom steps and spawns ----------------------------------------------------------------


@pytest.mark.anyio
async def test_custom_steps_are_keyed_by_position_and_replayed() -> None:
    executed: list[str] = []

    async def route(ctx: RunContext, question: str) -> str:
        picks = []
        for choice in ("billing", "data"):
            async def decide(choice: str = choice) -> dict:
                executed.append(choice)
                return {"next": choice}

            outcome = await ctx.step("route", decide, request={"question": question})
            picks.append(outcome.value["next"])
        return ",".join(picks)

    store = MemoryStore()
    model = FunctionModel(lambda messages, params: (
        f"routed {messages[-1].content}" if isinstance(messages[-1], ToolReturn)
        else ToolCall("route", {"question": "refund?"})))
    agent = Agent("x", model=model, tools=[tool(route, journaled=False)], name="lead")
    first = await agent.run("go", run_id="r", options=journaled(store))
    again = await agent.run("go", run_id="r", options=journaled(store))
    assert first.output == again.output == "routed billing,data"
    assert executed == ["billing", "data"]
    keys = [s.key for s in store.list_steps("r")]
    assert "agent:lead/turn:1/tool:1/route:1" in keys
    assert "agent:lead/turn:1/tool:1/route:2" in keys
    assert "agent:lead/turn:1/tool:1" not in keys     # journaled=False: the body re-runs


@pytest.mark.anyio
async def test_a_spawn_replays_its_record_so_the_worker_is_rebuilt_with_the_same_id() -> None:
    store = MemoryStore()
    roster: dict[str, str] = {}

    async def spawn_worker(ctx: RunContext, role: str, instructions: str) -> str:
        record = await ctx.spawn(role, instructions)
        roster[record.role] = record.worker_id
        return f"spawned {record.role} as {record.worker_id}"

    def reply(messages, params):
        if isinstance(messages[-1], ToolReturn):
            return "ready"
        return ToolCall("spawn_worker", {"role": "critic", "instructions": "Critique."})

    audit = MemoryAuditLog()
    agent = Agent("x", model=FunctionModel(reply), name="lead", guards=Guards(audit_log=audit),
                  tools=[tool(spawn_worker, journaled=False)])
    ids = iter(["run-1", "worker-7", "run-2", "worker-8"])
    first = await agent.run("go", options=journaled(store, ids=lambda: next(ids)))
    assert roster == {"critic": "worker-7"}
    roster.clear()                                   # a new process: the overlay is empty
    await agent.run("go", run_id=first.run_id,
                    options=journaled(store, ids=lambda: next(ids)))
    assert roster == {"critic": "worker-7"}         # rebuilt, same id
    step = store.get_step("run-1", "agent:lead/turn:1/tool:1/spawn:critic")
    assert step is not None and step.result["worker_id"] == "worker-7"
    assert [e.data["worker_id"] for e in audit.of_kind("spawn")] == ["worker-7", "worker-7"]


# --- clock and ids ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_test_can_fix_the_clock_and_the_ids() -> None:
    audit = MemoryAuditLog()
    clock = ManualClock(1_700_000_000.0)
    options = RunOptions(clock=clock, ids=lambda: "run-fixed")
    model = ScriptedModel(["hello"])
    with model:
        result = await Agent("x", model=model, guards=Guards(audit_log=audit)).run(
            "hi", options=options)
    assert result.run_id == "run-fixed"
    assert {e.at for e in audit.entries} == {datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)}
    assert {e.run_id for e in audit.entries} == {"run-fixed"}


def test_run_sync_takes_the_same_options() -> None:
    store = MemoryStore()
    model = ScriptedModel(["hello"])
    agent = Agent("x", model=model, name="a")
    with model:
        result = agent.run_sync("hi", options=journaled(store, ids=lambda: "sync-run"))
    assert result.run_id == "sync-run"
    assert [s.key for s in store.list_steps("sync-run")] == ["agent:a/turn:1/model"]


def test_run_sync_options_do_not_leak_into_runs_started_without_them() -> None:
    store = MemoryStore()
    worker = Agent("w", model=ScriptedModel(["inner"]), name="worker")

    async def ask(ctx: RunContext) -> str:
        return (await worker.run("x")).output       # not nested: no options given

    model = ScriptedModel([ToolCall("ask"), "outer"])
    with model:
        result = Agent("x", model=model, tools=[ask], name="a").run_sync(
            "go", options=journaled(store, ids=lambda: "r"))
    assert result.output == "outer"
    assert [s.key for s in store.list_steps("r")] == [
        "agent:a/turn:1/model", "agent:a/turn:1/tool:1", "agent:a/turn:2/model"]


# --- nested runs ------------------------------------------------------------------------


def delegating_lead(worker: Agent, **kwargs) -> Agent:
    async def delegate(ctx: RunContext, task: str) -> str:
        result = await ctx.run_agent(worker, task)
        return f"{result.output} (lead sees {ctx.usage.model_calls} model calls)"

    def reply(messages, params):
        if isinstance(messages[-1], ToolReturn):
            return f"lead: {messages[-1].content}"
        return ToolCall("delegate", {"task": "find x"})

    model = FunctionModel(reply, name="lead")
    return Agent("Lead.", model=model, name="lead", tools=[tool(delegate, journaled=False)],
                 **kwargs)


def researching_worker(**kwargs) -> Agent:
    def lookup(q: str) -> str:
        return f"x is 42 ({q})"

    def reply(messages, params):
        if isinstance(messages[-1], ToolReturn):
            return f"found: {messages[-1].content}"
        return ToolCall("lookup", {"q": "x"})

    return Agent("Research.", model=FunctionModel(reply, name="worker"), name="worker",
                 tools=[lookup], **kwargs)


@pytest.mark.anyio
async def test_a_nested_run_counts_its_usage_once() -> None:
    """Seed 004's planted counter test: a parent step adds 1, a nested step adds 1, the
    parent reads 2, not 3."""
    worker = Agent("Answer.", model=ScriptedModel(["42"]), name="worker")

    async def consult(ctx: RunContext, question: str) -> str:
        result = await worker.run(question, options=ctx.nested())
        assert result.usage.model_calls == 1          # the nested result: its own usage
        return str(ctx.usage.model_calls)

    model = ScriptedModel([ToolCall("consult", {"question": "x?"}), "done"])
    with model:
        result = await Agent("x", model=model, tools=[consult]).run("go")
    [returned] = [m for m in result.messages if isinstance(m, ToolReturn)]
    assert returned.content == "2"
    assert result.usage.model_calls == 3              # 2 of its own + 1 nested, once each


@pytest.mark.anyio
async def test_a_nested_run_journals_under_its_parent_and_replays_whole() -> None:
    store = MemoryStore()
    worker = researching_worker()
    lead = delegating_lead(worker)
    first = await lead.run("go", run_id="root", options=journaled(store))
    assert first.output == "lead: found: x is 42 (x) (lead sees 3 model calls)"
    assert [s.key for s in store.list_steps("root")] == [
        "agent:lead/turn:1/model",
        "agent:lead/turn:1/tool:1/delegation:1/agent:worker/turn:1/model",
        "agent:lead/turn:1/tool:1/delegation:1/agent:worker/turn:1/tool:1",
        "agent:lead/turn:1/tool:1/delegation:1/agent:worker/turn:2/model",
        "agent:lead/turn:1/tool:1/delegation:1",
        "agent:lead/turn:2/model",
    ]
    assert first.usage.model_calls == 4

    again = await lead.run("go", run_id="root", options=journaled(store))
    assert len(worker.model.calls) == 2 and len(lead.model.calls) == 2   # nothing called again
    assert again.output == first.output
    assert again.usage == first.usage                  # the replayed delegation counted once


@pytest.mark.anyio
async def test_a_nested_run_interrupted_mid_run_replays_its_own_finished_steps() -> None:
    store = MemoryStore()
    crash = {"armed": True}

    def lookup(q: str) -> str:
        return f"x is 42 ({q})"

    def worker_reply(messages, params):
        if isinstance(messages[-1], ToolReturn):
            if crash["armed"]:
                crash["armed"] = False
                raise Crash()
            return f"found: {messages[-1].content}"
        return ToolCall("lookup", {"q": "x"})

    worker_model = FunctionModel(worker_reply)
    worker = Agent("Research.", model=worker_model, name="worker", tools=[lookup])
    lead = delegating_lead(worker)
    with pytest.raises(Crash):
        await lead.run("go", run_id="root", options=journaled(store))
    assert len(worker_model.calls) == 2 and len(lead.model.calls) == 1

    result = await lead.run("go", run_id="root", options=journaled(store))
    assert result.output == "lead: found: x is 42 (x) (lead sees 3 model calls)"
    # resumed: the lead's first call and the worker's first call and tool were replayed;
    # only the worker's interrupted call and the lead's last call ran
    assert len(worker_model.calls) == 3 and len(lead.model.calls) == 2


@pytest.mark.anyio
async def test_nested_events_reach_the_outer_stream_while_the_nested_run_runs() -> None:
    seen_worker_call = anyio.Event()

    async def gate() -> str:
        await seen_worker_call.wait()    # the consumer must see the worker's events first
        return "open"

    worker = Agent("w", name="worker", tools=[gate],
                   model=ScriptedModel([ToolCall("gate"), "worker answer"]))
    lead = delegating_lead(worker)
    events = []
    with anyio.fail_after(5):
        async for event in lead.stream("go", run_id="root"):
            events.append(event)
            if event.level == 1 and event.kind == "tool_call":
                seen_worker_call.set()
    nested = [e for e in events if e.level == 1]
    assert {e.agent for e in nested} == {"worker"}
    assert {e.parent_run_id for e in nested} == {"root"}
    assert {e.parent_path for e in nested} == {"agent:lead/turn:1/tool:1/delegation:1"}
    assert "text_delta" in {e.kind for e in nested}          # the worker's text streams too
    assert events[-1].kind == "final" and events[-1].level == 0
    assert events[-1].result.output.startswith("lead: worker answer")
    top = [e.kind for e in events if e.level == 0]
    assert top[:2] == ["model_call", "tool_call"] and top[-1] == "final"
    # the worker's final event comes before the lead's tool result it feeds
    worker_final = next(i for i, e in enumerate(events) if e.kind == "final" and e.level == 1)
    lead_result = next(i for i, e in enumerate(events) if e.kind == "tool_result" and e.level == 0)
    assert worker_final < lead_result


@pytest.mark.anyio
async def test_a_nested_run_has_caps_of_its_own_and_the_parents_budget_bounds_it() -> None:
    def always_looks(messages, params):
        return ModelResponse(tool_calls=(ToolCall("lookup", {"q": "x"}),),
                             usage=Usage(1, 30, 10))

    looping = researching_worker(guards=Guards(limits=Limits(max_turns=2)))
    looping.model = FunctionModel(always_looks)
    lead = delegating_lead(looping, guards=Guards(limits=Limits(max_turns=5)))
    result = await lead.run("go")
    assert result.completed                                      # the lead goes on
    assert len(looping.model.calls) == 2                          # the worker's own cap

    budgeted = researching_worker()
    budgeted.model = FunctionModel(always_looks)
    lead = delegating_lead(budgeted, guards=Guards(limits=Limits(max_tokens=100)))
    result = await lead.run("go")
    # each worker call uses 40 tokens of the lead's 100, and is told what is left
    lead_first = result.messages[2]
    assert isinstance(lead_first, ModelResponse)
    left = 100 - lead_first.usage.total_tokens
    worker_calls = budgeted.model.calls
    assert [c.params.settings.max_tokens for c in worker_calls] == [left, left - 40, left - 80]
    assert result.stop_reason == "max_tokens"
    [returned] = [m for m in result.messages if isinstance(m, ToolReturn)]
    assert "lead sees 4 model calls" in returned.content   # the worker stopped, the lead read it


@pytest.mark.anyio
async def test_a_nested_run_from_a_sync_tools_thread_is_refused_with_a_fix() -> None:
    worker = Agent("w", model=ScriptedModel(["never"]), name="worker")

    def consult(ctx: RunContext) -> str:
        return worker.run_sync("x", options=ctx.nested()).output

    model = ScriptedModel([ToolCall("consult"), "ok"])
    with model:
        result = await Agent("x", model=model, tools=[consult]).run("go")
    [returned] = [m for m in result.messages if isinstance(m, ToolReturn)]
    assert returned.is_error and "must run on its parent's event loop" in returned.content


# --- open vocabularies and layering ---------------------------------------------------------


@pytest.mark.anyio
async def test_stop_reasons_are_open_to_the_layers_above_and_typos_fail() -> None:
    STOP_REASONS.register("test_cap", "a cap of the test layer was reached")

    def stop_with(reason: str):
        def stop(ctx: RunContext) -> str:
            ctx.end(reason, detail="by the tool")
            return "stopping"
        return stop

    model = ScriptedModel([ToolCall("stop")])
    result = await Agent("x", model=model, tools=[tool(stop_with("test_cap"), name="stop")]).run(
        "go")
    assert (result.stop_reason, result.detail) == ("test_cap", "by the tool")
    with pytest.raises(ConfigurationError, match="unknown stop reason 'cpa'"):
        RunContext(agent=Agent("x", model=ScriptedModel()), run_id="r", user_id=None,
                   messages=[], tools={}).end("cpa")
    with pytest.raises(ConfigurationError, match="already registered"):
        STOP_REASONS.register("completed", "something else")


def test_the_agent_layer_never_imports_the_work_layer() -> None:
    for path in sorted(AGENTS_SRC.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                assert not module.startswith(("..work", "foreperson.work")), (path, module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("foreperson.work") for a in node.names), path


@pytest.mark.anyio
async def test_a_streamed_run_raises_its_own_error_not_a_group() -> None:
    model = ScriptedModel([ModelError("bad request", status_code=400)])
    with pytest.raises(ModelError, match="bad request"):
        async for _ in Agent("x", model=model).stream("hi"):
            pass


@pytest.mark.anyio
async def test_an_event_sink_of_your_own_sees_every_run_at_every_level() -> None:
    received = []

    async def sink(event) -> None:
        received.append((event.level, event.agent, event.kind))

    worker = Agent("w", name="worker", model=ScriptedModel(["inner"]))
    inner_lead = delegating_lead(worker)
    inner_lead.name = "middle"

    async def ask_middle(ctx: RunContext) -> str:
        result = await inner_lead.run("go", options=ctx.nested())
        return result.output

    model = ScriptedModel([ToolCall("ask_middle"), "top"])
    with model:
        result = await Agent("x", model=model, tools=[ask_middle], name="top").run(
            "go", options=RunOptions(events=sink))
    assert result.output == "top"
    assert (2, "worker", "final") in received and (1, "middle", "final") in received
    assert received[-1] == (0, "top", "final")
