"""The offline ticket model: labels from the examples, drafts, triage reasons."""

from __future__ import annotations

import json

import pytest

from foreperson.errors import InputError
from foreperson.tickets.job import Outbox
from foreperson.tickets.model import Classification, TicketModel, bundled_examples, load_examples


@pytest.fixture(scope="module")
def model():
    return TicketModel(bundled_examples())


def test_bundled_examples_cover_several_languages_and_categories():
    examples = bundled_examples()
    assert len({e.category for e in examples}) >= 6
    assert all(e.answer for e in examples)


@pytest.mark.parametrize(("text", "category"), [
    ("I was charged twice, please refund the second payment", "billing"),
    ("Phishing-Mail mit Ihrem Logo erhalten, Sicherheitsproblem", "security"),
    ("El servicio está caído para todos los usuarios", "outage"),
])
def test_classifies_into_the_example_categories(model, text, category):
    assert model.classify(text).category == category


def test_draft_comes_from_an_answered_example_of_the_category(model):
    draft = model.draft("please refund my double charge", "billing")
    example = model.examples[draft["example"]]
    assert example.category == "billing" and draft["draft_reply"] == example.answer


@pytest.mark.parametrize(("text", "reason"), [
    ("Our lawyer will take legal action", "legal (lawyer)"),
    ("I think my account was hacked", "security (hacked)"),
    ("The whole platform is down since 9am", "outage (is down)"),
    ("Das ist eine Frechheit", "angry customer (frechheit)"),
    ("WHY DOES NOTHING WORK HERE", "angry customer (shouting)"),
])
def test_triage_flags_what_needs_a_human_with_the_reason(model, text, reason):
    verdict = model.triage(text, Classification("billing", 0.99, "high"))
    assert verdict.needs_human and reason in verdict.reasons


def test_low_confidence_needs_a_human(model):
    verdict = model.triage("hello", Classification("general", 0.01, "low"))
    assert verdict.needs_human and verdict.reason.startswith("low confidence")
    assert not model.triage("thanks", Classification("general", 0.99, "low")).needs_human


def test_user_examples_set_the_labels(tmp_path):
    path = tmp_path / "labelled.csv"
    rows = ["subject,body,queue,answer,priority"]
    for i in range(6):
        rows.append(f"Invoice {i},wrong amount on invoice {i},Billing and Payments,We fixed it,low")
        rows.append(f"Crash {i},app crashes when opening file {i},Technical Support,Update it,high")
    path.write_text("\n".join(rows) + "\n")
    model = TicketModel(load_examples(path))
    assert model.labels == ["Billing and Payments", "Technical Support"]
    got = model.classify("the app crashes on open")
    assert got.category == "Technical Support" and got.priority == "high"


def test_examples_need_two_labels(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text("text,label\na,x\nb,x\n")
    with pytest.raises(InputError, match="two different labels"):
        load_examples(path)


def test_outbox_writes_each_ticket_once_and_cuts_a_torn_line(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps({"id": "1"}) + "\n" + '{"id": "2", "categ')
    box = Outbox(path)
    assert box.sent == {"1"}
    assert box.send([{"id": "1"}, {"id": "2", "category": "x"}, {"id": "2"}]) == 1
    box.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["1", "2"]
    assert lines[1]["category"] == "x"


def test_a_second_writer_of_the_same_output_is_refused(tmp_path):
    from foreperson.errors import ConfigurationError
    first = Outbox(tmp_path / "out.jsonl")
    try:
        with pytest.raises(ConfigurationError, match="another foreperson job"):
            Outbox(tmp_path / "out.jsonl")
    finally:
        first.close()
    Outbox(tmp_path / "out.jsonl").close()     # free again once the first is closed


def test_outbox_never_changes_a_file_that_is_not_its_own(tmp_path):
    precious = tmp_path / "precious.json"
    precious.write_bytes(b'{"important": "config"}')          # no newline at the end
    with pytest.raises(InputError, match="not a foreperson results file"):
        Outbox(precious)
    assert precious.read_bytes() == b'{"important": "config"}'
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 20)
    with pytest.raises(InputError, match="not a foreperson results file"):
        Outbox(binary)
    assert binary.read_bytes() == bytes(range(256)) * 20


def test_outbox_refuses_directories_and_devices(tmp_path):
    from foreperson.errors import ConfigurationError
    with pytest.raises(ConfigurationError, match="not a regular file"):
        Outbox(tmp_path)
    with pytest.raises(ConfigurationError, match="not a regular file"):
        Outbox("/dev/null")


def test_a_worker_with_another_model_never_claims_the_jobs_tasks(model):
    from foreperson.tickets.job import model_fingerprint, ticket_app, ticket_tasks
    from foreperson.tickets.model import Example
    from foreperson.tickets.reader import Ticket
    from foreperson.work import MemoryStore

    other = TicketModel([Example("refund", "money"), Example("crash", "bugs")])
    store = MemoryStore()
    store.add(ticket_tasks(Ticket("1", "Refund", "charged twice", 2),
                           model=model_fingerprint(model)))
    wrong = ticket_app(other).worker("misconfigured")
    right = ticket_app(model).worker("configured")
    assert store.claim(wrong.name, wrong.can_do, 10) == []
    assert [t.id for t in store.claim(right.name, right.can_do, 10)] == ["1/classify"]
