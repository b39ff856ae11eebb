"""Function workers (issue 20 item 4): a plain function, sync or async, typed in and out,
is a team worker with no model: delegated to, recorded and capped like an agent, and
counting no model call."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from foreperson.agents import Agent
from foreperson.errors import ConfigurationError
from foreperson.models import ToolCall
from foreperson.teams import FINISH, Team, function_worker
from foreperson.testing import ScriptedModel
from foreperson.work import Status


class Credit(BaseModel):
    percent: int
    reason: str


class Outage(BaseModel):
    minutes: int


def credits(outage: Outage) -> Credit:
    """Work out the service credit of an outage."""
    return Credit(percent=10 if outage.minutes > 30 else 0, reason=f"{outage.minutes} min")


async def operations(text: str) -> str:
    """Explain what broke."""
    return f"storage node failed ({len(text)} chars read)"


def first_then_finish(*names: str):
    return lambda state: names[state.specialist_calls] if state.specialist_calls < len(
        names) else FINISH


@pytest.mark.anyio
async def test_a_rule_routed_team_of_functions_makes_no_model_call():
    calls: list[str] = []

    def billing(text: str) -> str:
        calls.append(text)
        return "10 % credit"

    team = Team.router(workers={"operations": operations, "billing": billing},
                       decide=first_then_finish("operations", "billing"))
    result = await team.run("My server went down. Credits?")
    assert result.completed and result.output == "10 % credit"
    assert result.usage.model_calls == 0 and result.specialist_calls == 2
    assert "[operations] storage node failed" in calls[0]          # it saw the work so far
    assert [d.worker for d in result.delegations] == ["operations", "billing"]
    task = team.architecture.store.get(result.delegations[1].task_id)
    assert task.status is Status.COMPLETED and task.kind == "billing"


@pytest.mark.anyio
async def test_typed_input_is_parsed_from_json_and_typed_output_is_forwarded_as_its_model():
    model = ScriptedModel([
        ToolCall("delegate", {"worker": "credits", "instructions": '{"minutes": 45}'}),
        ToolCall("forward_message", {"worker": "credits"}),
    ])
    team = Team.supervisor(workers={"credits": function_worker(credits)}, instructions="x",
                           model=model)
    result = await team.run("credits for a 45-minute outage?")
    assert result.output == Credit(percent=10, reason="45 min")
    assert result.usage.model_calls == 2                           # the supervisor's only
    tools = model.calls[0].params.tools
    delegate = next(t for t in tools if t.name == "delegate")
    assert "Work out the service credit of an outage." in delegate.description
    assert '"minutes"' in delegate.description        # the JSON its instructions must be


@pytest.mark.anyio
async def test_instructions_that_are_not_the_json_the_function_takes_fail_the_delegation():
    team = Team.router(workers={"credits": credits}, decide=first_then_finish("credits"))
    result = await team.run("about 45 minutes")
    assert result.stop_reason == "worker_failed" and result.partial == ["credits"]
    error = result.delegations[0].error
    assert "takes Outage as JSON" in error and "credits" in error


@pytest.mark.anyio
async def test_a_function_that_raises_is_retried_then_fails_as_a_status():
    attempts: list[int] = []

    def flaky(text: str) -> str:
        attempts.append(1)
        if len(attempts) < 2:
            raise RuntimeError("upstream said 503")
        return "ok"

    team = Team.pipeline([function_worker(flaky)], max_attempts=2, retry_backoff_s=0.0)
    result = await team.run("go")
    assert result.completed and result.output == "ok" and len(attempts) == 2


@pytest.mark.anyio
async def test_a_function_returning_what_is_not_json_fails_naming_the_worker():
    team = Team.pipeline([function_worker(lambda text: object(), name="odd")])
    result = await team.run("go")
    assert result.stop_reason == "worker_failed"
    assert "'odd' returned object, which is not JSON" in result.delegations[0].error


def test_bad_functions_are_refused_at_construction():
    with pytest.raises(ConfigurationError, match="exactly one argument"):
        function_worker(lambda a, b: a, name="two")
    with pytest.raises(ConfigurationError, match="give the worker a name"):
        function_worker(lambda a: a)
    with pytest.raises(ConfigurationError, match="not an Agent or a function"):
        Team.router(workers={"x": 42}, decide=lambda s: FINISH)
    worker = function_worker(credits)
    assert isinstance(worker, Agent) and worker.output_type is Credit and worker.name == "credits"
