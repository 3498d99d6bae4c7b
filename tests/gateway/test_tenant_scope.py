"""Provider-side state belongs to the tenant that created it (issue 29, findings 2 and 7), through a real
`prefixgate serve` in front of `prefixgate mock-providers`: explicit Gemini caches and stored Responses live in
the gateway's one provider account, so the gateway is what keeps tenants apart."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
import pytest

from prefixgate.ledger import read_records
from prefixgate.policies import hash_key
from prefixgate.providers.cached_contents import parse_rfc3339
from tests.support_services import wait_until
from tests.support_stack import policy_env, running_stack

ACME_1, ACME_2, BETA, CLAUDE_ONLY = "pg-acme-one-0123456789", "pg-acme-two-0123456789", "pg-beta-0123456789ab", "pg-claude-0123456789"
ACME_READER, ADMIN = "pg-acme-reader-0123456789", "admin-token-tenant-scope-0001"
POLICY = {
    "routes": [{"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]},
               {"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
               {"name": "private", "models": ["gpt-5.6-luna"], "targets": [{"upstream": "openai"}], "isolation": "tenant"},
               {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
               {"name": "vertex", "models": ["gemini-3.8-flash"], "targets": [{"upstream": "vertex"}]}],
    "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME_1), "tenant": "acme"},
             {"name": "acme-batch", "key_sha256": hash_key(ACME_2), "tenant": "acme"},
             {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"},
             {"name": "claude-only", "key_sha256": hash_key(CLAUDE_ONLY), "routes": ["claude"]},
             {"name": "acme-reader", "key_sha256": hash_key(ACME_READER), "tenant": "acme", "dashboard": "read",
              "routes": ["claude"]}],
}
DOCUMENT = "Clause {}: the warranty covers parts and labour for two years from delivery. "
MODEL = "gemini-3.5-flash"
SLOW = "gpt-5.6-terra"


def goog(key: str) -> dict:
    return {"x-goog-api-key": key}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scope")
    env = policy_env(tmp, POLICY, ANTHROPIC_API_KEY="sk-ant-gateway-own-0000", PREFIXGATE_ADMIN_TOKEN=ADMIN)
    # A slow stream for one model: a test can act between a stream's first event and its last.
    (tmp / "faults.yaml").write_text(f'faults: [{{fault: "event_delay=0.2", model: {SLOW}}}]')
    with running_stack(tmp, env, ("--faults", str(tmp / "faults.yaml"))) as (gw, mock):
        yield gw, mock, tmp / "ledger.sqlite"


def create_cache(gw: str, key: str, ttl: str = "600s") -> httpx.Response:
    text = "".join(DOCUMENT.format(i) for i in range(300))
    return httpx.post(f"{gw}/v1beta/cachedContents", headers=goog(key), json={
        "model": f"models/{MODEL}", "contents": [{"role": "user", "parts": [{"text": text}]}], "ttl": ttl})


def test_a_cache_is_its_tenants_alone(stack):
    gw, mock, ledger = stack
    made = create_cache(gw, ACME_1)
    assert made.status_code == 200, made.text
    name = made.json()["name"]
    url = f"{gw}/v1beta/{name}"
    # The other tenant: as if the cache did not exist, in Gemini's error shape; the cache is untouched.
    for method, body in (("GET", None), ("PATCH", {"ttl": "60s"}), ("DELETE", None)):
        r = httpx.request(method, url, headers=goog(BETA), json=body)
        assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND", (method, r.text)
    listed = httpx.get(f"{gw}/v1beta/cachedContents", headers=goog(BETA)).json()
    assert name not in [c["name"] for c in listed.get("cachedContents", [])]
    used = httpx.post(f"{gw}/v1beta/models/{MODEL}:generateContent", headers=goog(BETA), json={
        "cachedContent": name, "contents": [{"role": "user", "parts": [{"text": "Summarise the warranty."}]}]})
    assert used.status_code == 404 and "usageMetadata" not in used.text
    # Another key of the same tenant sees it; its own creator reads it through a request.
    assert httpx.get(url, headers=goog(ACME_2)).json()["name"] == name
    assert name in [c["name"] for c in httpx.get(f"{gw}/v1beta/cachedContents", headers=goog(ACME_2)).json()["cachedContents"]]
    own = httpx.post(f"{gw}/v1beta/models/{MODEL}:generateContent", headers=goog(ACME_1), json={
        "cachedContent": name, "contents": [{"role": "user", "parts": [{"text": "Summarise the warranty."}]}]})
    assert own.status_code == 200 and own.json()["usageMetadata"]["cachedContentTokenCount"] > 1024
    # The mock still holds it, with the lifetime its creator gave it.
    direct = httpx.get(f"{mock}/v1beta/{name}", headers=goog("AIzaGatewayOwnKey0000000000000")).json()
    assert direct["expireTime"] == made.json()["expireTime"]


def test_a_key_limited_to_claude_cannot_touch_gemini_caches(stack):
    gw, _, _ = stack
    name = create_cache(gw, ACME_1).json()["name"]
    for r in (httpx.get(f"{gw}/v1beta/cachedContents", headers=goog(CLAUDE_ONLY)),
              httpx.get(f"{gw}/v1beta/{name}", headers=goog(CLAUDE_ONLY)),
              httpx.delete(f"{gw}/v1beta/{name}", headers=goog(CLAUDE_ONLY)),
              create_cache(gw, CLAUDE_ONLY)):
        assert r.status_code in (403, 404) and r.json()["error"]["status"] in ("PERMISSION_DENIED", "NOT_FOUND"), r.text
    assert httpx.get(f"{gw}/v1beta/{name}", headers=goog(ACME_1)).status_code == 200


def test_cache_lifetimes_are_capped_and_their_creation_is_billed(stack):
    gw, _, ledger = stack
    assert create_cache(gw, BETA, ttl="315360000s").status_code == 400
    made = create_cache(gw, BETA, ttl="1800s").json()
    before = made["expireTime"]
    r = httpx.patch(f"{gw}/v1beta/{made['name']}", headers=goog(BETA), json={"ttl": "315360000s"})
    assert r.status_code == 400 and "max_cache_ttl_s" in r.json()["error"]["message"]
    assert httpx.get(f"{gw}/v1beta/{made['name']}", headers=goog(BETA)).json()["expireTime"] == before
    def cache_records() -> list[dict]:
        return sorted((r for r in read_records(str(ledger)) if r["key"] == "beta"
                       and any(line.startswith("cachedContents.") for line in r["explanation"])), key=lambda r: r["ts"])

    wait_until(lambda: len(cache_records()) >= 1, 5, "the create in the ledger")
    rec = cache_records()[0]
    tokens = made["usageMetadata"]["totalTokenCount"]
    assert rec["cache_writes"] == {"explicit": tokens} and rec["tenant"] == "beta"
    # Gemini 3.5 Flash (ai.google.dev/gemini-api/docs/pricing): created at the $1.50/MTok input rate, stored at
    # $1.00 per MTok-hour for the half hour asked.
    expected = Decimal(tokens) * Decimal("1.50") / 10**6 + Decimal(tokens) * Decimal("0.5") * Decimal("1.00") / 10**6
    assert abs(Decimal(rec["cost_usd"]) - expected) < Decimal("1e-9")
    # Extending the lifetime buys storage from the old expiry to the new one, at $1.00 per MTok-hour.
    longer = httpx.patch(f"{gw}/v1beta/{made['name']}", headers=goog(BETA), json={"ttl": "7200s"}).json()
    wait_until(lambda: len(cache_records()) >= 2, 5, "the patch in the ledger")
    patch = cache_records()[1]
    bought_h = (Decimal(str(parse_rfc3339(longer["expireTime"], "e"))) - Decimal(str(parse_rfc3339(before, "e")))) / 3600
    assert abs(Decimal(patch["cost_usd"]) - Decimal(tokens) * bought_h * Decimal("1.00") / 10**6) < Decimal("1e-9")


def bearer(key: str) -> dict:
    return {"authorization": f"Bearer {key}"}


def test_a_stored_response_and_its_chain_are_its_tenants_alone(stack):
    gw, _, _ = stack
    made = httpx.post(f"{gw}/v1/responses", headers=bearer(ACME_1), json={
        "model": "gpt-5.5", "input": "Remember: the launch code is 4417.", "store": True})
    assert made.status_code == 200, made.text
    rid = made.json()["id"]
    for method, tail in (("GET", ""), ("GET", "/input_items"), ("POST", "/cancel"), ("DELETE", "")):
        r = httpx.request(method, f"{gw}/v1/responses/{rid}{tail}", headers=bearer(BETA))
        assert r.status_code == 404 and r.json()["error"]["message"] == f"Response with id '{rid}' not found.", r.text
        assert "4417" not in r.text
    chained = httpx.post(f"{gw}/v1/responses", headers=bearer(BETA), json={
        "model": "gpt-5.5", "input": "What was the code?", "previous_response_id": rid})
    # OpenAI's refusal of an id it does not hold: a 400 with code previous_response_not_found.
    assert chained.status_code == 400 and chained.json()["error"]["code"] == "previous_response_not_found", chained.text
    assert "4417" not in chained.text
    # The same tenant's other key reads it and continues the chain; the chain's next link is the tenant's too.
    assert httpx.get(f"{gw}/v1/responses/{rid}/input_items", headers=bearer(ACME_2)).status_code == 200
    follow = httpx.post(f"{gw}/v1/responses", headers=bearer(ACME_2), json={
        "model": "gpt-5.5", "input": "What was the code?", "previous_response_id": rid})
    assert follow.status_code == 200, follow.text
    assert httpx.get(f"{gw}/v1/responses/{follow.json()['id']}", headers=bearer(BETA)).status_code == 404
    assert httpx.delete(f"{gw}/v1/responses/{rid}", headers=bearer(ACME_1)).status_code == 200


def cached_reading(gw: str, key: str, model: str, system: str) -> int:
    r = httpx.post(f"{gw}/v1/chat/completions", headers=bearer(key), json={
        "model": model, "messages": [{"role": "system", "content": system}, {"role": "user", "content": "Hello?"}]})
    assert r.status_code == 200, r.text
    return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_an_isolated_route_keeps_one_tenants_cache_unobservable_to_another(stack):
    gw, _, _ = stack
    shared = "You are ACME's contract reviewer. " + "".join(DOCUMENT.format(i) for i in range(120))
    private = "You are ACME's pricing analyst. " + "".join(DOCUMENT.format(i) for i in range(120))
    # A shared route: the other tenant's exact guess of the prompt reads it from the provider's cache.
    assert cached_reading(gw, ACME_1, "gpt-5.5", shared) == 0
    assert cached_reading(gw, BETA, "gpt-5.5", shared) > 1000
    # `isolation: tenant`: the tenant still reads its own cache; the exact guess reads nothing.
    assert cached_reading(gw, ACME_1, "gpt-5.6-luna", private) == 0
    assert cached_reading(gw, ACME_2, "gpt-5.6-luna", private) > 1000
    assert cached_reading(gw, BETA, "gpt-5.6-luna", private) == 0


def test_a_tenants_dashboard_reader_reads_that_tenants_records_only(stack):
    gw, _, ledger = stack
    for key in (ACME_1, BETA):
        assert cached_reading(gw, key, "gpt-5.5", "Short prompt for the ledger.") == 0
    wait_until(lambda: {"acme", "beta"} <= {r["tenant"] for r in read_records(str(ledger))}, 10, "both tenants recorded")
    mine = httpx.get(f"{gw}/api/requests?range=1h&limit=1000", headers=bearer(ACME_READER))
    assert mine.status_code == 200 and mine.json()["records"]
    assert {r["key"] for r in mine.json()["records"]} <= {"acme-app", "acme-batch"}
    assert httpx.get(f"{gw}/api/misses?range=1h", headers=bearer(ACME_READER)).status_code == 200
    # Totals and breakdowns are this tenant's own (tests/gateway/dashboard/test_dashboard_tenant_reader.py has the
    # figures); alerts are per route across every tenant: not this reader's.
    tenants = httpx.get(f"{gw}/api/breakdown?by=tenant&range=1h", headers=bearer(ACME_READER))
    assert tenants.status_code == 200 and [r["name"] for r in tenants.json()["rows"]] == ["acme"]
    assert httpx.get(f"{gw}/api/alerts", headers=bearer(ACME_READER)).status_code == 403
    everything = httpx.get(f"{gw}/api/requests?range=1h&limit=1000", headers=bearer(ADMIN)).json()["records"]
    assert {"acme-app", "beta"} <= {r["key"] for r in everything}


def test_a_vertex_cache_is_its_tenants_alone(stack):
    gw, _, _ = stack
    root = f"{gw}/v1/projects/caller-project/locations/us-east5/cachedContents"
    text = "".join(DOCUMENT.format(i) for i in range(300))
    made = httpx.post(root, headers=bearer(ACME_1), json={
        "model": "projects/caller-project/locations/us-east5/publishers/google/models/gemini-3.8-flash",
        "contents": [{"role": "user", "parts": [{"text": text}]}], "ttl": "600s"})
    assert made.status_code == 200, made.text
    ident = made.json()["name"].rsplit("/", 1)[1]
    assert httpx.get(f"{root}/{ident}", headers=bearer(ACME_2)).status_code == 200
    for method in ("GET", "DELETE"):
        r = httpx.request(method, f"{root}/{ident}", headers=bearer(BETA))
        assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND", r.text
    assert ident not in httpx.get(root, headers=bearer(BETA)).text
    assert httpx.patch(f"{root}/{ident}", headers=bearer(ACME_1), json={"ttl": "315360000s"}).status_code == 400
    assert httpx.get(root, headers=bearer(CLAUDE_ONLY)).status_code == 403


def test_a_streamed_response_is_its_tenants_from_its_first_event(stack):
    gw, _, _ = stack
    body = {"model": SLOW, "input": "Write a long story about a lighthouse.", "stream": True, "store": True}
    with httpx.stream("POST", f"{gw}/v1/responses", headers=bearer(ACME_1), json=body) as r:
        lines = r.iter_lines()
        created = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
        assert created["type"] == "response.created"
        rid = created["response"]["id"]
        # Before the stream ends, the creator's tenant may already cancel or fetch it, and no one else may.
        assert httpx.get(f"{gw}/v1/responses/{rid}", headers=bearer(BETA)).status_code == 404
        assert httpx.get(f"{gw}/v1/responses/{rid}", headers=bearer(ACME_2)).status_code != 404
        list(lines)
