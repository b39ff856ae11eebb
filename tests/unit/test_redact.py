"""Credentials never reach a message (issue 21 item 6): a password in a base URL, a key a
failing server echoes back, the configured key itself."""

from __future__ import annotations

import socket

import pytest

from foreperson.errors import ConfigurationError, ModelError, redact, redact_url
from foreperson.models import AnthropicProvider, OpenAIProvider, check_reachable

KEY = "sk-proj-Abc123Def456Ghi789Jkl012"


@pytest.mark.parametrize(("text", "expected"), [
    ("https://user:key@host/v1", "https://user:***@host/v1"),
    ("see http://ada:pa%40ss@10.0.0.1:8000/v1?x=1 now",
     "see http://ada:***@10.0.0.1:8000/v1?x=1 now"),
    ("https://ghp_0123456789abcdefghijKLMN@github.com/x", "https://***@github.com/x"),
    ("http://bob@host/x", "http://bob@host/x"),              # a short user name is not a secret
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
])
def test_url_passwords_are_replaced(text: str, expected: str) -> None:
    assert redact_url(text) == expected
    assert redact(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    (f"Incorrect API key provided: {KEY}. You can find your key",
     "Incorrect API key provided: ***. You can find your key"),
    ("invalid x-api-key: sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA-BBBB",
     "invalid x-api-key: ***"),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123456789", "Authorization: Bearer ***"),
    ('{"token": "0123456789abcdef0123456789abcdef"}', '{"token": "***"}'),
    ("api_key=dGhpcyBpcyBhIHNlY3JldCBrZXkgMTIz&x=1", "api_key=***&x=1"),
    ("hf_AbCdEfGhIjKlMnOpQrStUv0123 and AIzaSyA1234567890abcdefghijklmnopqrstu",
     "*** and ***"),
    # short values after a secret's name, whatever their length
    ("DB_PASSWORD=hunter2 host=db", "DB_PASSWORD=*** host=db"),
    ("{'api_key': 'abcd1'}", "{'api_key': '***'}"),
    ("GET /v1?access_token=abc&page=2", "GET /v1?access_token=***&page=2"),
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ***"),
    ("stripe: sk_live_0123456789abcdefABCD", "stripe: ***"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlMTIz", "jwt ***"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY----- done",
     "*** done"),
    ("https://u:p@ss@host/x", "https://u:***@host/x"),        # a raw @ in the password
])
def test_strings_that_look_like_keys_are_replaced(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(redact(text)) == redact(text)      # idempotent


@pytest.mark.parametrize("text", [
    "model openai:gpt-4o: the request timed out after 30 s (timeout_s)",
    "task-abcdefghijklmnopqrstuvwxyz is DEAD",
    "the key internationalization-considerations matters",      # no digit: a word
    "HTTP 404: model 'llama3.1:8b' not found",
    "I forgot my password and cannot log in",
    "FATAL: password authentication failed for user \"app\"",
    "unknown key 'agents' in team.yaml line 3",
    "max_tokens=512 temperature=0.2",
])
def test_ordinary_messages_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_given_secrets_are_replaced_wherever_they_appear() -> None:
    assert redact("echoed: my-own-secret!", ["my-own-secret!"]) == "echoed: ***"
    # too short to search for safely, and None, are ignored
    assert redact("x marks the spot", ["x", None]) == "x marks the spot"


def test_a_model_error_never_holds_a_key() -> None:
    error = ModelError(f"model openai:m: HTTP 401: Incorrect API key provided: {KEY}",
                       status_code=401)
    assert KEY not in str(error) and "***" in str(error)


def test_providers_show_no_url_password_and_keep_their_key_out_of_messages() -> None:
    url = "https://ada:hunter2-Secret@llm.example.com/v1"
    openai = OpenAIProvider(api_key="my-configured-key-1", base_url=url)
    assert "hunter2" not in repr(openai) and "ada:***@llm.example.com" in repr(openai)
    assert set(openai.secrets) == {"my-configured-key-1", "hunter2-Secret"}
    assert openai.redact("the server said my-configured-key-1 is wrong") == (
        "the server said *** is wrong")
    anthropic = AnthropicProvider(api_key="sk-ant-x", base_url=url)
    assert "hunter2" not in repr(anthropic)
    breaker = openai.breaker_for("m")
    assert breaker is not None and "hunter2" not in breaker.endpoint
    # a local server needs no key: the placeholder is not a secret to hunt for
    assert OpenAIProvider(base_url="http://127.0.0.1:9/v1").secrets == ()


def test_check_reachable_does_not_print_the_url_password() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))          # bound, not listening: refused
    port = sock.getsockname()[1]
    try:
        with pytest.raises(ConfigurationError, match="not reachable") as info:
            check_reachable(f"http://ada:hunter2-Secret@127.0.0.1:{port}/v1")
    finally:
        sock.close()
    assert "hunter2" not in str(info.value)
    assert f"http://ada:***@127.0.0.1:{port}/v1" in str(info.value)
    with pytest.raises(ConfigurationError, match="expected http") as info:
        check_reachable("ftp://ada:hunter2-Secret@host/v1")
    assert "hunter2" not in str(info.value)


def test_the_ticket_jobs_remote_hint_never_prints_a_url_password(tmp_path):
    from foreperson.tickets.job import JobOptions, _remote_hint

    hint = _remote_hint(JobOptions(tmp_path / "in.csv", model="m",
                                   base_url="https://user:s3cr3t-k3y@llm.example/v1"))
    assert "s3cr3t-k3y" not in hint and "FOREPERSON_TICKETS_BASE_URL=https://user:" in hint
