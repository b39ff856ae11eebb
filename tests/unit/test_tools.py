"""Tools from plain functions: schemas, validation, errors the model can correct, and
parallel dispatch with results in call order."""

from __future__ import annotations

import threading
from datetime import date

import anyio
import pytest
from pydantic import BaseModel

from foreperson.agents import Agent, RunContext, Tool, tool
from foreperson.errors import ConfigurationError
from foreperson.models import ToolCall, ToolReturn
from foreperson.testing import ScriptedModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def tool_returns(messages) -> list[ToolReturn]:
    return [m for m in messages if isinstance(m, ToolReturn)]


# --- schemas ---------------------------------------------------------------------------


def book_room(room: str, day: date, people: int = 2, notes: str | None = None) -> str:
    """Book a meeting room.

    Checks availability first.

    Args:
        room: the room's name, as on the door.
        day: the day to book.
        people (int): how many will attend; the room
            must seat them all.
        notes: anything for the front desk.

    Returns:
        A confirmation code.
    """
    return f"{room}-{day.isoformat()}-{people}"


def test_the_schema_comes_from_hints_and_the_docstring() -> None:
    made = Tool.from_function(book_room)
    assert made.name == "book_room"
    assert made.description == "Book a meeting room.\n\nChecks availability first."
    schema = made.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["room", "day"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["room"] == {"type": "string", "description": "the room's name, as on the door."}
    assert props["day"]["format"] == "date"
    assert props["people"]["default"] == 2
    assert props["people"]["description"] == (
        "how many will attend; the room must seat them all."
    )
    assert "title" not in schema and "title" not in props["room"]


def test_arguments_are_validated_and_converted() -> None:
    made = Tool.from_function(book_room)
    assert made.validate({"room": "Fjord", "day": "2025-03-04", "people": "5"}) == {
        "room": "Fjord", "day": date(2025, 3, 4), "people": 5, "notes": None,
    }


def test_a_run_context_parameter_is_hidden_and_filled_in() -> None:
    async def whoami(ctx: RunContext, greeting: str) -> str:
        return f"{greeting}, {ctx.user_id}"

    made = Tool.from_function(whoami)
    assert list(made.parameters["properties"]) == ["greeting"]
    assert made.context_parameter == "ctx"


def test_the_decorator_renames_and_stays_callable() -> None:
    @tool(name="lookup-user", description="Find a user.")
    def find(user_id: int) -> dict:
        return {"id": user_id}

    assert isinstance(find, Tool)
    assert (find.name, find.description) == ("lookup-user", "Find a user.")
    assert find(user_id=3) == {"id": 3}


@pytest.mark.parametrize(
    "function",
    [lambda *names: None, lambda **options: None, lambda x, /: None],
    ids=["args", "kwargs", "positional-only"],
)
def test_functions_a_model_cannot_call_by_name_are_refused(function) -> None:
    with pytest.raises(ConfigurationError, match="named parameters only"):
        Tool.from_function(function, name="f")


def test_a_name_providers_refuse_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="letters, digits"):
        Tool.from_function(book_room, name="book room!")


def test_two_tools_with_one_name_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="two tools are named 'book_room'"):
        Agent("x", model=ScriptedModel(), tools=[book_room, Tool.from_function(book_room)])


# --- errors go back to the model -------------------------------------------------------


@pytest.mark.anyio
async def test_invalid_arguments_come_back_as_a_result_the_model_corrects() -> None:
    model = ScriptedModel([
        ToolCall("book_room", {"room": "Fjord", "day": "next tuesday", "extra": 1}),
        ToolCall("book_room", {"room": "Fjord", "day": "2025-03-04"}),
        "Booked: Fjord-2025-03-04-2",
    ])
    with model:
        result = await Agent("Book rooms.", model=model, tools=[book_room]).run("Book Fjord")
    first, second = tool_returns(result.messages)
    assert first.is_error
    assert "day: Input should be a valid date" in first.content
    assert "extra: Extra inputs are not permitted" in first.content
    assert (second.is_error, second.content) == (False, "Fjord-2025-03-04-2")
    assert result.output == "Booked: Fjord-2025-03-04-2"


@pytest.mark.anyio
async def test_arguments_that_are_not_json_come_back_as_a_result() -> None:
    model = ScriptedModel([ToolCall("book_room", '{"room": "Fjord", '), "sorry"])
    with model:
        result = await Agent("x", model=model, tools=[book_room]).run("go")
    [returned] = tool_returns(result.messages)
    assert returned.is_error
    assert "not valid JSON" in returned.content


@pytest.mark.anyio
async def test_a_tool_exception_comes_back_as_a_result() -> None:
    def divide(a: float, b: float) -> float:
        return a / b

    model = ScriptedModel([ToolCall("divide", {"a": 1, "b": 0}), "cannot divide by zero"])
    with model:
        result = await Agent("x", model=model, tools=[divide]).run("1/0")
    [returned] = tool_returns(result.messages)
    assert returned.is_error
    assert "ZeroDivisionError" in returned.content
    assert result.completed


@pytest.mark.anyio
async def test_an_unknown_tool_comes_back_as_a_result_listing_the_tools() -> None:
    model = ScriptedModel([ToolCall("cancel_room", {}), "ok"])
    with model:
        result = await Agent("x", model=model, tools=[book_room]).run("go")
    [returned] = tool_returns(result.messages)
    assert returned.is_error
    assert "no tool named 'cancel_room'" in returned.content
    assert "book_room" in returned.content


@pytest.mark.anyio
async def test_return_values_reach_the_model_as_json() -> None:
    class Room(BaseModel):
        name: str
        seats: int

    def rooms() -> list[Room]:
        return [Room(name="Fjord", seats=8)]

    def room() -> Room:
        return Room(name="Delta", seats=4)

    model = ScriptedModel([[ToolCall("rooms"), ToolCall("room")], "done"])
    with model:
        result = await Agent("x", model=model, tools=[rooms, room]).run("go")
    assert [r.content for r in tool_returns(result.messages)] == [
        '[{"name":"Fjord","seats":8}]', '{"name":"Delta","seats":4}',
    ]


# --- parallel dispatch ---------------------------------------------------------------


@pytest.mark.anyio
async def test_async_tools_of_one_turn_run_concurrently() -> None:
    # each tool waits for the other to start: run one after the other, they would hang
    started = {"a": anyio.Event(), "b": anyio.Event()}

    async def meet(me: str, other: str) -> str:
        started[me].set()
        with anyio.fail_after(5):
            await started[other].wait()
        return f"{me} met {other}"

    model = ScriptedModel([
        [ToolCall("meet", {"me": "a", "other": "b"}), ToolCall("meet", {"me": "b", "other": "a"})],
        "both met",
    ])
    with model:
        result = await Agent("x", model=model, tools=[meet]).run("go")
    assert [r.content for r in tool_returns(result.messages)] == ["a met b", "b met a"]


@pytest.mark.anyio
async def test_sync_tools_run_concurrently_in_worker_threads() -> None:
    barrier = threading.Barrier(2, timeout=5)
    loop_thread = threading.get_ident()

    def wait_for_partner(name: str) -> bool:
        barrier.wait()  # both calls must be in flight at once
        return threading.get_ident() != loop_thread

    model = ScriptedModel([
        [ToolCall("wait_for_partner", {"name": "x"}), ToolCall("wait_for_partner", {"name": "y"})],
        "ok",
    ])
    with model:
        result = await Agent("x", model=model, tools=[wait_for_partner]).run("go")
    assert [r.content for r in tool_returns(result.messages)] == ["true", "true"]


@pytest.mark.anyio
async def test_results_return_in_call_order_whatever_order_they_finish_in() -> None:
    second_done = anyio.Event()
    finished: list[str] = []

    async def step(name: str) -> str:
        if name == "first":
            with anyio.fail_after(5):
                await second_done.wait()
        finished.append(name)
        if name == "second":
            second_done.set()
        return name

    model = ScriptedModel([
        [ToolCall("step", {"name": "first"}), ToolCall("step", {"name": "second"})],
        "done",
    ])
    with model:
        result = await Agent("x", model=model, tools=[step]).run("go")
    assert finished == ["second", "first"]
    returned = tool_returns(result.messages)
    assert [(r.call_id, r.content) for r in returned] == [("call_1", "first"), ("call_2", "second")]


def test_tool_call_arguments_that_are_none_or_not_text_do_not_escape():
    from foreperson.models import ToolCall

    assert ToolCall("now", None).arguments_dict() == {}          # type: ignore[arg-type]
    import pytest as _pytest
    with _pytest.raises(ValueError, match="JSON object"):
        ToolCall("now", 5).arguments_dict()                       # type: ignore[arg-type]
