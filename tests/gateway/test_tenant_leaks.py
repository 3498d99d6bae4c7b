"""Side doors around tenant scope, through a real `prefixgate serve` in front of `prefixgate mock-providers`:
paths that name another tenant's provider-side state without making a model request (token counts), and
dashboard reads that are not records (forecasts, alert rules). Each must answer another tenant as if the
state did not exist, or refuse a tenant's reader, as test_tenant_scope.py's model paths and records do."""

from __future__ import annotations

import httpx
import pytest

from prefixgate.cache_planner import PlannerState
from prefixgate.cache_planner.reuse import BOUNDS
from prefixgate.cache_planner.stability import RouteState
from prefixgate.ledger import read_records
from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import ServerThread, running_gateway, settings_for
from tests.support_services import wait_until
from tests.support_stack import policy_env, running_stack

ACME_1, ACME_2, BETA = "pg-leak-acme-one-012345", "pg-leak-acme-two-012345", "pg-leak-beta-0123456789"
ACME_READER, ADMIN = "pg-leak-acme-reader-0123", "admin-token-tenant-leaks-01"
POLICY = {
    "routes": [{"name": "gemini", "models": ["gemini-3.5-*"], "targets": [{"upstream": "gemini"}]},
               {"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
               {"name": "vertex", "models": ["gemini-3.8-flash"], "targets": [{"upstream": "vertex"}]}],
    "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME_1), "tenant": "acme"},
             {"name": "acme-batch", "key_sha256": hash_key(ACME_2), "tenant": "acme"},
             {"name": "beta-secret-project", "key_sha256": hash_key(BETA), "tenant": "beta",
              "budget": {"usd": 100, "period": "month"}},
             {"name": "acme-reader", "key_sha256": hash_key(ACME_READER), "tenant": "acme", "dashboard": "read",
              "routes": ["openai"]}],
}
DOCUMENT = "Clause {}: the warranty covers parts and labour for two years from delivery. "
MODEL = "gemini-3.5-flash"


def goog(key: str) -> dict:
    return {"x-goog-api-key": key}


def bearer(key: str) -> dict:
    return {"authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("leaks")
    with running_stack(tmp, policy_env(tmp, POLICY, PREFIXGATE_ADMIN_TOKEN=ADMIN)) as (gw, mock):
        yield gw, mock, tmp / "ledger.sqlite"


def test_a_tenant_reader_gets_no_forecast_or_alert_firings_of_other_tenants(stack):
    gw, _, ledger = stack
    r = httpx.post(f"{gw}/v1/chat/completions", headers=bearer(BETA), json={
        "model": "gpt-5.5", "messages": [{"role": "user", "content": "Spend something."}]})
    assert r.status_code == 200, r.text
    wait_until(lambda: any(rec["key"] == "beta-secret-project" for rec in read_records(str(ledger))), 10, "beta recorded")
    # The forecast lists every key's and route's spend and the gateway's total: another tenant's figures.
    for path in ("/api/forecast", "/api/alerts/rules"):
        mine = httpx.get(f"{gw}{path}", headers=bearer(ACME_READER))
        assert mine.status_code == 403, (path, mine.text)
        assert "beta-secret-project" not in mine.text
    # The admin still reads them.
    everything = httpx.get(f"{gw}/api/forecast", headers=bearer(ADMIN))
    assert everything.status_code == 200 and "beta-secret-project" in everything.text
    assert httpx.get(f"{gw}/api/alerts/rules", headers=bearer(ADMIN)).status_code == 200


def test_counting_tokens_never_reads_another_tenants_stored_response(stack):
    gw, _, _ = stack
    secret = "Remember this contract: " + "".join(DOCUMENT.format(i) for i in range(40))
    made = httpx.post(f"{gw}/v1/responses", headers=bearer(ACME_1), json={"model": "gpt-5.5", "input": secret, "store": True})
    assert made.status_code == 200, made.text
    rid = made.json()["id"]
    body = {"model": "gpt-5.5", "input": "And now?", "previous_response_id": rid}
    # The other tenant: refused as a model request naming it is, as OpenAI refuses an id it does not hold (a 400
    # naming the field, code previous_response_not_found); the count would say it exists and how long it is.
    theirs = httpx.post(f"{gw}/v1/responses/input_tokens", headers=bearer(BETA), json=body)
    assert theirs.status_code == 400, theirs.text
    assert theirs.json()["error"] == {"message": f"Previous response with id '{rid}' not found.", "type":
                                      "invalid_request_error", "param": "previous_response_id",
                                      "code": "previous_response_not_found"}
    assert "input_tokens" not in theirs.json()
    # The same tenant's other key counts the chain.
    own = httpx.post(f"{gw}/v1/responses/input_tokens", headers=bearer(ACME_2), json=body)
    assert own.status_code == 200 and own.json()["input_tokens"] > 500, own.text


def test_counting_tokens_never_reads_another_tenants_explicit_cache(stack):
    gw, _, _ = stack
    text = "".join(DOCUMENT.format(i) for i in range(300))
    made = httpx.post(f"{gw}/v1beta/cachedContents", headers=goog(ACME_1), json={
        "model": f"models/{MODEL}", "contents": [{"role": "user", "parts": [{"text": text}]}], "ttl": "600s"})
    assert made.status_code == 200, made.text
    name = made.json()["name"]
    question = [{"role": "user", "parts": [{"text": "Summarise the warranty."}]}]
    url = f"{gw}/v1beta/models/{MODEL}:countTokens"
    for body in ({"cachedContent": name, "contents": question},
                 {"generateContentRequest": {"model": f"models/{MODEL}", "cachedContent": name, "contents": question}}):
        theirs = httpx.post(url, headers=goog(BETA), json=body)
        assert theirs.status_code == 404 and theirs.json()["error"]["status"] == "NOT_FOUND", theirs.text
        assert "totalTokens" not in theirs.text
        own = httpx.post(url, headers=goog(ACME_2), json=body)
        assert own.status_code == 200 and own.json()["totalTokens"] > 1024, own.text

    # Vertex: the same cache scope on its countTokens.
    root = f"{gw}/v1/projects/caller-project/locations/us-east5"
    vmade = httpx.post(f"{root}/cachedContents", headers=bearer(ACME_1), json={
        "model": "projects/caller-project/locations/us-east5/publishers/google/models/gemini-3.8-flash",
        "contents": [{"role": "user", "parts": [{"text": text}]}], "ttl": "600s"})
    assert vmade.status_code == 200, vmade.text
    vurl = f"{root}/publishers/google/models/gemini-3.8-flash:countTokens"
    vbody = {"cachedContent": vmade.json()["name"], "contents": question}
    theirs = httpx.post(vurl, headers=bearer(BETA), json=vbody)
    assert theirs.status_code == 404 and "totalTokens" not in theirs.text, theirs.text
    own = httpx.post(vurl, headers=bearer(ACME_2), json=vbody)
    assert own.status_code == 200 and own.json()["totalTokens"] > 1024, own.text


SYSTEM = "You are the ACME warranty assistant. Answer from the policy below.\n" + "Policy clause: coverage lasts two years. " * 700


class Seeded(PlannerState):
    """Every new route has the record that makes an explicit cache pay (its static prefix back 12 times an hour,
    always after the implicit cache lapsed), whatever the route is named."""

    def route(self, name: str) -> RouteState:
        fresh = name not in self.routes
        rs = super().route(name)
        if fresh:
            stats = rs.reuse.level("static")
            stats.requests = stats.reuses = 12
            stats.gap_sum = 12 * 300.0
            stats.within = [0.0] + [12.0] * (len(BOUNDS) - 1)
        return rs


def test_on_an_open_gateway_one_callers_explicit_cache_is_never_planned_for_another(tmp_path, monkeypatch):
    """No caller keys and no gateway Gemini key: each caller's own key goes upstream, so a cache the planner
    created with one caller's key lives in that caller's Google project. Another caller's request must not be
    sent against it (at Google: a 403 for the other project, that caller's request failed; where it would be
    read, the other account's cache)."""
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        with running_gateway(settings, planner_state=Seeded()) as gw:
            def ask(key: str, question: str) -> httpx.Response:
                return httpx.post(f"{gw.url}/v1beta/models/{MODEL}:generateContent", timeout=30,
                                  headers={**goog(key), "x-prefixgate-route": "warranty"},
                                  json={"systemInstruction": {"parts": [{"text": SYSTEM}]},
                                        "contents": [{"role": "user", "parts": [{"text": question}]}]})
            first = ask("AIzaCallerOne000000000000000000", "Is my toaster covered?")
            assert first.status_code == 200 and first.json()["usageMetadata"]["cachedContentTokenCount"] > 5000, first.text
            other = ask("AIzaCallerTwo000000000000000000", "And my kettle?")
            assert other.status_code == 200, other.text
            again = ask("AIzaCallerOne000000000000000000", "And my iron?")
            assert again.status_code == 200 and again.json()["usageMetadata"]["cachedContentTokenCount"] > 5000
        wait_until(lambda: len(read_records(settings.ledger_path)) >= 3, 5, "three ledger records")
    records = sorted(read_records(settings.ledger_path), key=lambda r: r["ts"])
    created = [line.split()[4] for r in records for line in r["explanation"] if "created explicit cache" in line]
    # Each caller's cache is its own: the second caller created one with its own key, read nothing of the first's.
    assert len(created) == 2 and created[0] != created[1], [r["explanation"] for r in records]
    assert not any(created[0] in line for line in records[1]["explanation"])
