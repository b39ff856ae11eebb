"""Reading tickets: formats, column detection, and errors that name file and line."""

from __future__ import annotations

import json

import pytest

from foreperson.errors import InputError
from foreperson.tickets.reader import read_tickets


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_with_quoted_multiline_fields_and_commas(tmp_path):
    path = write(tmp_path, "t.csv",
                 'id,subject,body\n7,"Refund, please","line one\nline ""two""\n"\n8,Hi,short\n')
    got = read_tickets(path)
    assert [(t.id, t.subject, t.body, t.line) for t in got.tickets] == [
        ("7", "Refund, please", 'line one\nline "two"', 2), ("8", "Hi", "short", 5)]


def test_columns_are_found_by_name_in_any_case_and_order(tmp_path):
    path = write(tmp_path, "t.csv", "Description,Ticket_ID,Title\nit broke,X-1,Broken\n")
    (ticket,) = read_tickets(path).tickets
    assert (ticket.id, ticket.subject, ticket.body) == ("X-1", "Broken", "it broke")


def test_without_an_id_column_the_row_number_is_the_id(tmp_path):
    path = write(tmp_path, "t.csv", "subject,body\na,b\nc,d\n")
    assert [t.id for t in read_tickets(path).tickets] == ["1", "2"]


def test_flags_override_the_columns(tmp_path):
    path = write(tmp_path, "t.csv", "ref,headline,msg\nR1,H,M\n")
    (ticket,) = read_tickets(path, id_column="ref", subject_column="headline",
                             body_column="msg").tickets
    assert (ticket.id, ticket.subject, ticket.body) == ("R1", "H", "M")
    with pytest.raises(InputError, match="no column 'nope'"):
        read_tickets(path, body_column="nope")


def test_a_body_under_another_name_is_not_left_out_without_a_word(tmp_path):
    path = write(tmp_path, "t.csv", "id,subject,message_text\n1,Refund,charged twice\n")
    with pytest.raises(InputError, match="no body column .* --body-column"):
        read_tickets(path)
    (ticket,) = read_tickets(path, body_column="message_text").tickets
    assert (ticket.subject, ticket.body) == ("Refund", "charged twice")
    (alone,) = read_tickets(path, body_column="subject").tickets
    assert (alone.subject, alone.body) == ("", "Refund")
    only = write(tmp_path, "s.csv", "id,subject\n1,Refund please\n")   # nothing else
    assert read_tickets(only).tickets[0].subject == "Refund please"


def test_rows_without_text_are_reported_not_dropped(tmp_path):
    path = write(tmp_path, "t.csv", "id,subject,body\n1,,\n2,hello,\n")
    got = read_tickets(path)
    assert [t.id for t in got.tickets] == ["2"]
    assert got.skipped == [(2, "1", "no subject or body text")]


@pytest.mark.parametrize(("text", "line", "message"), [
    ('id,subject,body\n1,a,b\n2,"unterminated,x\n', 3, "malformed CSV"),
    ("id,subject,body\n1,a,b\n2,a,b,extra\n", 3, "4 fields where the header has 3"),
    ("id,id,body\n1,2,3\n", 1, "columns 1 and 2 are both named 'id'"),
    ("id,,body\n1,2,3\n", 1, "column 2 of the header has no name"),
])
def test_malformed_csv_names_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, "bad.csv", text)
    with pytest.raises(InputError, match=message) as caught:
        read_tickets(path)
    assert caught.value.line == line and str(caught.value).startswith(f"{path}:{line}:")


def test_an_empty_file_is_named_without_a_line(tmp_path):
    path = write(tmp_path, "bad.csv", "")
    with pytest.raises(InputError) as caught:
        read_tickets(path)
    assert caught.value.line is None and str(caught.value) == f"{path}: the file is empty"


def test_duplicate_ticket_id_is_an_error_naming_both_lines(tmp_path):
    path = write(tmp_path, "t.csv", "id,body\n1,a\n2,b\n1,c\n")
    with pytest.raises(InputError, match=r"'1' at lines 2, 4"):
        read_tickets(path)


def test_no_text_column_lists_what_was_found(tmp_path):
    path = write(tmp_path, "t.csv", "id,when\n1,today\n")
    with pytest.raises(InputError, match=r"found \['id', 'when'\]"):
        read_tickets(path)


def test_json_list_and_jsonl(tmp_path):
    items = [{"id": 1, "subject": "a", "body": "b"}, {"id": 2, "subject": "", "body": "c"}]
    as_json = write(tmp_path, "t.json", json.dumps(items, indent=2))
    as_jsonl = write(tmp_path, "t.jsonl", "\n".join(json.dumps(i) for i in items) + "\n")
    for path in (as_json, as_jsonl):
        assert [(t.id, t.text) for t in read_tickets(path).tickets] == [("1", "a\nb"), ("2", "c")]
    assert read_tickets(as_json).tickets[1].line == 7


@pytest.mark.parametrize(("name", "text", "line", "message"), [
    ("t.json", '[\n {"id": 1, "body": "x"},\n {"id": 2 "body": "y"}\n]', 3, "invalid JSON"),
    ("t.json", '{"id": 1}', 1, "expected a JSON list"),
    ("t.json", '[{"id": 1, "body": "x"},\n 5]', 2, "item 2 is int"),
    ("t.jsonl", '{"id": 1, "body": "x"}\n{"id": 2, "body": \n', 2, "invalid JSON"),
    ("t.jsonl", '{"id": 1, "body": "x"}\n[1]\n', 2, "expected a JSON object"),
])
def test_malformed_json_names_file_and_line(tmp_path, name, text, line, message):
    path = write(tmp_path, name, text)
    with pytest.raises(InputError, match=message) as caught:
        read_tickets(path)
    assert caught.value.line == line


def test_unreadable_inputs_say_what_to_do(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_tickets(tmp_path / "missing.csv")
    with pytest.raises(InputError, match="use .csv, .json"):
        read_tickets(write(tmp_path, "t.xlsx", "x"))
    latin = tmp_path / "latin.csv"
    latin.write_bytes("id,body\n1,caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8") as caught:
        read_tickets(latin)
    assert caught.value.line == 2


def test_semicolon_separated_csv_is_recognised(tmp_path):
    path = write(tmp_path, "t.csv", 'id;subject;body\n1;Hi;"a; b"\n')
    (ticket,) = read_tickets(path).tickets
    assert (ticket.subject, ticket.body) == ("Hi", "a; b")


def test_long_fields_and_unicode_line_separators_are_kept(tmp_path):
    body = "x" * 300_000
    path = write(tmp_path, "t.csv", f"id,body\n1,{body}\n2,one\u2028two\x0cthree\n")
    tickets = read_tickets(path, max_chars=400_000).tickets     # the CSV field is read whole
    assert len(tickets[0].body) == 300_000
    assert tickets[1].body == "one\u2028two\x0cthree"
    assert len(read_tickets(path).tickets[0].body) == 100_000     # the default bound


def test_json_object_holding_the_list(tmp_path):
    text = json.dumps({"meta": {"tags": ["x"]}, "tickets": [{"id": 1, "body": "a"}]})
    path = write(tmp_path, "t.json", text)
    assert [t.id for t in read_tickets(path).tickets] == ["1"]
    deep = write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="nested too deeply|expected"):
        read_tickets(deep)


@pytest.mark.parametrize(("value", "shown"), [(2010, "2010"), (7.0, "7"), ("A-1", "A-1")])
def test_json_ids_become_text(tmp_path, value, shown):
    path = write(tmp_path, "t.json", json.dumps([{"id": value, "body": "x"}]))
    assert read_tickets(path).tickets[0].id == shown


@pytest.mark.parametrize("value", [True, {"a": 1}, [1]])
def test_ids_that_are_not_text_or_numbers_are_rejected(tmp_path, value):
    path = write(tmp_path, "t.jsonl", json.dumps({"id": value, "body": "x"}) + "\n")
    with pytest.raises(InputError, match="is not text or a number"):
        read_tickets(path)


def test_identical_repeated_rows_are_processed_once_and_reported(tmp_path):
    rows = ["id,subject,body"] + [f"T-{i},,please refund invoice {i}" for i in range(1, 11)]
    path = write(tmp_path, "t.csv", "\n".join(rows + [rows[7], rows[3]]) + "\n")
    got = read_tickets(path)
    assert [t.id for t in got.tickets] == [f"T-{i}" for i in range(1, 11)]
    assert got.skipped == [(12, "T-7", "repeats line 8 (same id and text): processed once"),
                           (13, "T-3", "repeats line 4 (same id and text): processed once")]


def test_every_id_shared_by_different_rows_is_named_at_once(tmp_path):
    path = write(tmp_path, "t.csv", "id,body\n1,a\n2,b\n1,c\n3,d\n2,e\n2,b\n")
    with pytest.raises(InputError) as caught:
        read_tickets(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:4: 2 ticket id(s) are used by rows with different text")
    assert "'1' at lines 2, 4" in message and "'2' at lines 3, 6" in message


def test_a_pipe_separated_file_is_named_as_such(tmp_path):
    path = write(tmp_path, "t.csv", 'id|subject|body\n1|"Refund"|"charged twice"\n')
    with pytest.raises(InputError, match=r"t.csv:1: the header has no ',' but has '\|'"):
        read_tickets(path)


def test_standard_input_is_refused_with_what_to_do():
    with pytest.raises(InputError, match="standard input is not supported"):
        read_tickets("-")
