"""Secrets never reach a file or a log: the shapes `perrec_eval.secrets` hides (audit of 2026-11-26)."""

from __future__ import annotations

import base64
import logging

import pytest

from perrec_eval.errors import ConfigError
from perrec_eval.secrets import RedactingFormatter, check_env_name, redact, redact_text


@pytest.mark.parametrize(
    "url",
    [
        "http://alice:P@SSWORD999@127.0.0.1:18004/v1",
        "http://alice:pa'ss999@127.0.0.1:18004/v1",
        "http://alice:PW SECRET999@127.0.0.1:18004/v1",
        "http://alice:pa%40ss999@[::1]:18004/v1",
    ],
)
def test_redact_text_hides_a_url_password_whole(url):
    assert redact_text(url) == "http://<redacted>@" + url.rpartition("@")[2]
    assert redact({"base_url": [url]})["base_url"][0].startswith("http://<redacted>@")


@pytest.mark.parametrize("name", ["code", "key", "api-key", "token", "sig", "access_token", "pwd"])
def test_redact_text_hides_known_key_query_parameters(name):
    assert redact_text(f"http://h:1/v1?{name}=AZFUNCKEY99&x=1") == f"http://h:1/v1?{name}=<redacted>&x=1"


def test_redact_hides_credentials_inside_extra_body():
    extra = {"authorization": "Basic ZWJ1c2VyOkVCU0VDUkVUMg==", "user": {"private_key": "EBSECRET3"}}
    extra["user"]["access_key_id"] = "AKIAEBSECRET4"
    recorded = redact({"engine_args": [f"extra_body={extra}"], "extra_body": extra, "top_k": 5})
    text = repr(recorded)
    assert all(secret not in text for secret in ("ZWJ1c2VyOkVCU0VDUkVUMg", "EBSECRET3", "AKIAEBSECRET4"))
    assert recorded["top_k"] == 5


def test_redact_text_hides_basic_and_other_authorization_headers():
    assert redact_text("Authorization: Basic YWxpY2U6UFdTRUNSRVQxMTE=") == "Authorization: Basic <redacted>"
    assert redact_text("authorization: Token abcdef") == "authorization: Token <redacted>"
    assert redact_text("Basic information, basically") == "Basic information, basically"
    assert redact_text("api_key=secretvalue <redacted>") == "api_key=<redacted> <redacted>"


def test_redact_text_hides_github_and_openai_project_tokens():
    text = "ghp_abcdefghijklmnopqrstuvwxyz0123456789 and sk-proj-AbC_123-xyz-0000"
    assert redact_text(text) == "<redacted> and <redacted>"


def test_register_url_hides_the_basic_header_value_of_its_credentials():
    from perrec_eval.secrets import register_url

    register_url("http://alice:PWSECRET111@127.0.0.1:18005/v1?code=AZFUNC-KEY-77")
    basic = base64.b64encode(b"alice:PWSECRET111").decode()
    echoed = f'{{"error": "bad request from {basic}"}} PWSECRET111 AZFUNC-KEY-77'
    assert redact_text(echoed) == '{"error": "bad request from <redacted>"} <redacted> <redacted>'


def test_check_env_name_hint_survives_redaction():
    with pytest.raises(ConfigError) as err:
        check_env_name("sk-pasted-key-0123456789")
    record = logging.LogRecord("perrecbench", logging.ERROR, __file__, 1, str(err.value), None, None)
    line = RedactingFormatter("%(message)s").format(record)
    assert "export OPENAI_API_KEY=... and pass --api-key-env OPENAI_API_KEY" in line


def test_register_url_hides_a_key_given_as_the_user_name():
    from perrec_eval.secrets import register_url

    register_url("https://KEYASUSER-4242@host/v1")
    assert redact_text("echo: KEYASUSER-4242") == "echo: <redacted>"
