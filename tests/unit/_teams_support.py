"""Test models and agents shared by the team tests: every model call is logged by node
name, so a test can read the order of calls like seed 004's tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio

from foreperson.agents import Agent
from foreperson.models import Message, ModelRequestParameters, ModelResponse, UserMessage
from foreperson.teams import RouteDecision, Team
from foreperson.testing import FunctionModel, Reply, ScriptedModel

OUTAGE = "My server went down last night. Do I get service credits?"
FOLLOW_UP = "How do I claim them?"

ANSWERS = {
    "operations": "The outage came from a failed storage node; it was fixed at 02:10.",
    "billing": "Yes: an outage over 30 minutes earns a 10 % service credit.",
    "data": "No data was lost.",
}


class Logged(ScriptedModel):
    """A scripted model that appends its node's name to a shared log on every call."""

    def __init__(self, node: str, replies: Sequence[Reply], log: list[str]) -> None:
        super().__init__(replies, name=node)
        self.node = node
        self.log = log

    async def request(self, messages: Sequence[Message], params: ModelRequestParameters
                      ) -> ModelResponse:
        self.log.append(self.node)
        return await super().request(messages, params)


class LoggedFunction(FunctionModel):
    """A function model that logs its node's name on every call."""

    def __init__(self, node: str, function: Callable[..., Any], log: list[str]) -> None:
        super().__init__(function, name=node)
        self.node = node
        self.log = log

    async def request(self, messages: Sequence[Message], params: ModelRequestParameters
                      ) -> ModelResponse:
        self.log.append(self.node)
        return await super().request(messages, params)


def answering(name: str, text: str | None = None, log: list[str] | None = None,
              **kwargs: Any) -> Agent:
    """A worker that always answers ``text`` (default: its Larkspur answer)."""
    answer = text if text is not None else ANSWERS.get(name, f"{name} answer")
    model = LoggedFunction(name, lambda messages, params: answer,
                           log if log is not None else [])
    return Agent(f"You are the {name} specialist.", model=model, name=name, **kwargs)


def prompt_of(messages: Sequence[Message]) -> str:
    """The last user message of a conversation."""
    return next(m.content for m in reversed(messages) if isinstance(m, UserMessage))


def decisions(*names: str) -> list[RouteDecision]:
    """Router replies: one decision per name."""
    return [RouteDecision(next=n, reasoning=f"{n} next") for n in names]


def larkspur_specialists(log: list[str]) -> dict[str, Agent]:
    return {name: answering(name, log=log) for name in ("operations", "billing", "data")}


def flat_router(log: list[str], *route: str) -> Team:
    """Seed 004's flat supervisor over operations, billing and data."""
    model = Logged("supervisor", decisions(*route), log)
    return Team.router(workers=larkspur_specialists(log), model=model, name="supervisor")


def two_team_hierarchy(log: list[str], ceo: Sequence[str], lead: Sequence[str]) -> Team:
    """Seed 004's two-team hierarchy: a CEO over an accounts team (its own lead over
    billing and data) and a platform team (a pipeline over operations)."""
    specialists = larkspur_specialists(log)
    accounts = Team.router(
        workers={"billing": specialists["billing"], "data": specialists["data"]},
        model=Logged("accounts_lead", decisions(*lead), log), name="accounts")
    platform = Team.pipeline([specialists["operations"]], name="platform")
    return Team.router(workers={"accounts": accounts, "platform": platform},
                       model=Logged("ceo", decisions(*ceo), log), name="ceo")


class Barrier:
    """Lets N concurrent model calls meet: each waits until all have arrived, so a test
    proves concurrency by finishing (sequential calls would wait forever; the test's
    ``fail_after`` turns that into a failure)."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.event = anyio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived >= self.parties:
            self.event.set()
        with anyio.fail_after(5):
            await self.event.wait()
