"""Model lifecycle at the gateway: a model retiring within 30 days is sent with a warning header; a retired
one follows the route's `on_retired` (warn: as asked; replace: the row's replacement; refuse: a 400 in the
caller's format). Dates from the providers' pages: claude-sonnet-4-5 retires 2026-11-30
(https://platform.claude.com/docs/pt-BR/models/sonnet-4-5/overview.md), claude-sonnet-4 retired 2026-06-15."""

from __future__ import annotations

from datetime import date

import httpx
import pytest

from prefixgate.gateway import lifecycle
from prefixgate.gateway.dashboard.retiring import retiring_routes
from prefixgate.ledger import LedgerRecord
from prefixgate.providers.rules import default_catalog
from tests.gateway.support_gateway import policy_stack

POLICY = {"routes": [
    {"name": "warned", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
    {"name": "replaced", "models": ["swap-*"], "on_retired": "replace",
     "targets": [{"upstream": "anthropic", "model": "claude-sonnet-4"}]},
    {"name": "refused", "models": ["strict-*"], "on_retired": "refuse",
     "targets": [{"upstream": "anthropic", "model": "claude-sonnet-4"}]},
]}
HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "caller"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with policy_stack(tmp_path_factory.mktemp("lifecycle"), POLICY) as (up, gw, _):
        yield up, gw


def ask(gw, model: str) -> httpx.Response:
    body = {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]}
    return httpx.post(f"{gw.url}/v1/messages", json=body, headers=HEADERS, timeout=10)


def test_a_retiring_model_is_sent_with_a_warning_header(stack):
    up, gw = stack
    up.reset()
    resp = ask(gw, "claude-sonnet-4-5")
    assert resp.status_code == 200 and up.received[-1].body["model"] == "claude-sonnet-4-5"
    assert resp.headers[lifecycle.HEADER] == "2026-11-30; replacement=claude-sonnet-5-5"
    assert lifecycle.HEADER not in ask(gw, "claude-sonnet-5-5").headers


def test_a_retired_model_is_replaced_or_refused_as_the_route_says(stack):
    up, gw = stack
    up.reset()
    assert ask(gw, "swap-me").status_code == 200
    assert up.received[-1].body["model"] == "claude-sonnet-5-5"
    refused = ask(gw, "strict-me")
    assert refused.status_code == 400 and refused.json()["type"] == "error"
    assert "retired" in refused.json()["error"]["message"] and "claude-sonnet-5-5" in refused.json()["error"]["message"]
    assert len(up.received) == 1     # nothing went upstream for the refused request
    # warn (the default): sent as asked
    assert ask(gw, "claude-sonnet-4").status_code == 200 and up.received[-1].body["model"] == "claude-sonnet-4"


def test_check_warns_only_within_30_days_and_keeps_the_model_under_warn():
    catalog = default_catalog()
    early = lifecycle.check("anthropic", "claude-sonnet-4-5", "warn", catalog, today=date(2026, 10, 30))
    assert early == lifecycle.Verdict("claude-sonnet-4-5")          # 31 days ahead: nothing yet
    soon = lifecycle.check("anthropic", "claude-sonnet-4-5", "refuse", catalog, today=date(2026, 10, 31))
    assert soon.model == "claude-sonnet-4-5" and "retires on 2026-11-30" in soon.note   # not retired: not refused
    late = lifecycle.check("anthropic", "claude-sonnet-4-5", "replace", catalog, today=date(2026, 11, 30))
    assert late.model == "claude-sonnet-5-5"


def test_the_dashboard_lists_routes_using_retiring_models():
    def rec(route: str, model: str) -> LedgerRecord:
        return LedgerRecord(id=route + model, ts=0.0, key="k", tenant="", route=route, target="t", provider="anthropic",
                            model=model, dialect="anthropic", stream=False, status=200)
    records = [rec("support", "claude-sonnet-4-5"), rec("support", "claude-sonnet-4-5"), rec("chat", "claude-sonnet-5-5"),
               rec("old", "gemini-2.5-flash")]
    records[-1] = LedgerRecord(**{**records[-1].__dict__, "provider": "gemini"})
    listed = retiring_routes(records, default_catalog(), today=date(2026, 11, 27))
    assert listed == [
        {"route": "support", "provider": "anthropic", "model": "claude-sonnet-4-5", "retires": "2026-11-30",
         "replacement": "claude-sonnet-5-5", "requests": 2},
        {"route": "old", "provider": "gemini", "model": "gemini-2.5-flash", "retires": "2026-12-01",
         "replacement": "gemini-3.5-flash-lite", "requests": 1},
    ]
