"""An upstream's refusal reaches the caller as the provider said it. A 429 asks for a wait in any form the providers
use: Retry-After in seconds or as an HTTP date (RFC 9110), OpenAI's retry-after-ms; the caller is told that wait, and
a value that is no wait ("inf", "nan") is ignored, never a gateway 500. A 4xx keeps OpenAI's error `code`."""

from __future__ import annotations

import time
from email.utils import formatdate

import anthropic
import openai
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from prefixgate.gateway.app import create_app
from tests.gateway.support_gateway import chat_stub_stack, policy_for, settings_for
from tests.support_services import ServerThread

ASKS: list[dict[str, str]] = []
RATE_LIMITED = {"message": "Rate limit reached", "type": "rate_limit_error"}
# OpenAI's answer to a prompt over the model's window (its API reference's error object: message, type, param, code).
TOO_LONG = {"message": "This model's maximum context length is 400000 tokens. However, your messages resulted in "
            "412345 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}


async def refuse(request) -> JSONResponse:
    asks = ASKS.pop(0)
    if asks.get("status") == "400":
        return JSONResponse({"error": TOO_LONG}, 400)
    if asks.get("status") == "301":     # an upstream URL that moved
        return JSONResponse({}, 301, headers={"location": "https://api.openai.com/v1/chat/completions"})
    return JSONResponse({"error": RATE_LIMITED}, 429, headers=asks)


ONCE = {"routes": [{"name": "once", "models": ["gpt-5.4"], "retry": {"attempts": 1}, "targets": [{"upstream": "openai"}]}]}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    with chat_stub_stack(tmp_path_factory.mktemp("retry-after"), refuse, ONCE) as (gw, _, _):
        yield gw


def refused(gw, asks: dict[str, str]) -> openai.RateLimitError:
    ASKS.append(asks)
    with pytest.raises(openai.RateLimitError) as exc:
        openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0).chat.completions.create(
            model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    return exc.value


@pytest.mark.parametrize("value", ["inf", "nan", "-Infinity", "soon"])
def test_a_retry_after_that_is_no_wait_is_ignored(gateway, value):
    err = refused(gateway, {"retry-after": value})
    assert "Rate limit reached" in err.message
    assert "retry-after" not in err.response.headers


def test_a_retry_after_http_date_is_passed_on_in_seconds(gateway):
    err = refused(gateway, {"retry-after": formatdate(time.time() + 120, usegmt=True)})
    assert 110 <= int(err.response.headers["retry-after"]) <= 120


def test_openai_retry_after_ms_is_read(gateway):
    err = refused(gateway, {"retry-after-ms": "2500"})
    assert err.response.headers["retry-after"] in ("2", "3")    # 2.5 s, in the whole seconds Retry-After takes


def test_an_openai_error_code_reaches_the_caller(gateway):
    """SDK callers branch on `code` (context_length_exceeded: trim the history and try again)."""
    ASKS.append({"status": "400"})
    with pytest.raises(openai.BadRequestError) as exc:
        openai.OpenAI(api_key="caller", base_url=gateway.url + "/v1", max_retries=0).chat.completions.create(
            model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    assert exc.value.code == "context_length_exceeded" and exc.value.param == "messages"
    assert "maximum context length is 400000 tokens" in exc.value.message


def test_an_upstream_redirect_is_a_bad_gateway_not_the_callers_mistake(gateway):
    ASKS.append({"status": "301"})
    with pytest.raises(openai.InternalServerError) as exc:
        openai.OpenAI(api_key="caller", base_url=gateway.url + "/v1", max_retries=0).chat.completions.create(
            model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}])
    assert exc.value.status_code == 502 and exc.value.type == "server_error"
    assert "location" not in exc.value.response.headers


# OpenAI's 429 as its rate-limit guide shows it: type the limit reached, code rate_limit_exceeded, and the headers
# its SDK and agents back off by.
OPENAI_LIMITS = {"retry-after-ms": "1500", "x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "0",
                 "x-ratelimit-reset-tokens": "1.5s", "x-ratelimit-limit-requests": "500",
                 "x-ratelimit-remaining-requests": "499", "x-ratelimit-reset-requests": "120ms"}
TOKENS_LIMITED = {"message": "Rate limit reached for gpt-5.4 on tokens per min (TPM): Limit 30000, Used 30000, "
                  "Requested 120.", "type": "tokens", "param": None, "code": "rate_limit_exceeded"}


async def limited(request) -> JSONResponse:
    return JSONResponse({"error": TOKENS_LIMITED}, 429, headers=OPENAI_LIMITS)


@pytest.fixture(scope="module")
def limiting(tmp_path_factory):
    with chat_stub_stack(tmp_path_factory.mktemp("limits"), limited, ONCE) as (gw, _, _):
        yield gw


@pytest.mark.parametrize("stream", [False, True])
def test_openais_429_reaches_an_openai_caller_as_openai_sent_it(limiting, stream):
    with pytest.raises(openai.RateLimitError) as exc:
        openai.OpenAI(api_key="caller", base_url=limiting.url + "/v1", max_retries=0).chat.completions.create(
            model="gpt-5.4", messages=[{"role": "user", "content": "Hi"}], stream=stream)
    err = exc.value
    assert err.type == "tokens" and err.code == "rate_limit_exceeded" and "tokens per min" in err.message
    assert {k: err.response.headers.get(k) for k in OPENAI_LIMITS} == OPENAI_LIMITS
    assert err.response.headers["retry-after"] == "2"      # 1.5 s in the whole seconds Retry-After takes


def test_openais_429_reaches_a_claude_caller_with_retry_after_alone(limiting):
    with pytest.raises(anthropic.RateLimitError) as exc:
        anthropic.Anthropic(api_key="caller", base_url=limiting.url, max_retries=0).messages.create(
            model="gpt-5.4", max_tokens=50, messages=[{"role": "user", "content": "Hi"}])
    headers = exc.value.response.headers
    assert exc.value.body["error"]["type"] == "rate_limit_error" and headers["retry-after"] == "2"
    assert not [k for k in headers if k.startswith("x-ratelimit-") or k == "retry-after-ms"]


# Anthropic's 429 as its rate-limits page shows it: rate_limit_error, retry-after, and anthropic-ratelimit-* headers.
ANTHROPIC_LIMITS = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
                    "anthropic-ratelimit-requests-reset": "2026-11-28T23:59:00Z", "retry-after": "7"}


async def claude_limited(request) -> JSONResponse:
    return JSONResponse({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests has "
                         "exceeded your rate limit"}}, 429, headers=ANTHROPIC_LIMITS)


def test_anthropics_429_reaches_a_claude_caller_with_its_rate_limit_headers(tmp_path):
    with ServerThread(Starlette(routes=[Route("/v1/messages", claude_limited, methods=["POST"])])) as up:
        settings = settings_for(up.url, tmp_path)
        once = {"routes": [{"name": "once", "models": ["claude-*"], "retry": {"attempts": 1},
                            "targets": [{"upstream": "anthropic"}]}]}
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-000111")
            with ServerThread(create_app(settings, policy=policy_for(settings, once))) as gw:
                with pytest.raises(anthropic.RateLimitError) as exc:
                    anthropic.Anthropic(api_key="caller", base_url=gw.url, max_retries=0).messages.create(
                        model="claude-sonnet-5-5", max_tokens=50, messages=[{"role": "user", "content": "Hi"}])
    assert {k: exc.value.response.headers.get(k) for k in ANTHROPIC_LIMITS} == ANTHROPIC_LIMITS
    assert exc.value.body["error"]["type"] == "rate_limit_error"
