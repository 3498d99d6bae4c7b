"""A tenant creating explicit caches (`cachedContents`, Gemini and Vertex) spends within its budget as a model request
does: the create holds what it may cost at most (its contents written at the input rate, and stored for the hours it
asks) until it is booked, so concurrent creates cannot each pass a budget not yet spent. Through a real
`prefixgate serve` in front of `prefixgate mock-providers`, whose cache creates take a second."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import httpx
import pytest

from prefixgate.ledger import read_records
from prefixgate.policies import hash_key
from tests.support_services import wait_until
from tests.support_stack import policy_env, running_stack, slowed

GEMINI, VERTEX = "pg-cache-holds-gemini-0123", "pg-cache-holds-vertex-0123"
OBJECTS = "pg-cache-holds-objects-0123"
AGREEMENT = "gs://acme-contracts/2026/master-agreement.pdf"     # granted to the key: Google reads it, the gateway cannot
MODEL = "gemini-3.5-flash"
POLICY = {
    "routes": [{"name": "gemini", "models": [MODEL], "targets": [{"upstream": "gemini"}]},
               {"name": "vertex", "models": ["gemini-3.8-flash"], "targets": [{"upstream": "vertex"}]}],
    "keys": [{"name": "gemini-small", "key_sha256": hash_key(GEMINI), "tenant": "beta",
              "budget": {"usd": 0.5, "period": "total"}},
             {"name": "vertex-small", "key_sha256": hash_key(VERTEX), "tenant": "gamma",
              "budget": {"usd": 0.5, "period": "total"}},
             {"name": "vertex-objects", "key_sha256": hash_key(OBJECTS), "tenant": "delta",
              "budget": {"usd": 1, "period": "total"}, "provider_ids": [AGREEMENT]}],
}
CONTRACT = "".join(f"Clause {i}: the warranty covers parts and labour for two years from delivery. " for i in range(1500))


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cache_holds")
    with running_stack(tmp, policy_env(tmp, POLICY), slowed(tmp, [MODEL, "gemini-3.8-flash"])) as (gw, _):
        yield gw, tmp / "ledger.sqlite"


async def _burst(url: str, headers: dict, body: dict, n: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(*(client.post(url, headers=headers, json=body) for _ in range(n)))


def _spent(ledger, key: str, created: int) -> Decimal:
    mine = lambda: [r for r in read_records(str(ledger)) if r["key"] == key]  # noqa: E731
    wait_until(lambda: len(mine()) >= created, 10, f"{key}'s creates booked")
    return sum((Decimal(r["cost_usd"]) for r in mine()), Decimal(0))


@pytest.mark.parametrize(("key", "path", "model"), [
    (GEMINI, "/v1beta/cachedContents", f"models/{MODEL}"),
    (VERTEX, "/v1/projects/caller-project/locations/us-east5/cachedContents",
     "projects/caller-project/locations/us-east5/publishers/google/models/gemini-3.8-flash")])
def test_concurrent_cache_creates_cannot_pass_a_small_budget(stack, key, path, model):
    gw, ledger = stack
    headers = {"x-goog-api-key": key} if key == GEMINI else {"authorization": f"Bearer {key}"}
    body = {"model": model, "ttl": "86400s", "contents": [{"role": "user", "parts": [{"text": CONTRACT}]}]}
    answers = asyncio.run(_burst(gw + path, headers, body, 6))
    statuses = sorted(a.status_code for a in answers)
    # One create costs about 24,500 tokens x ($1.50 input + 24 h x $1.00 storage) per MTok = $0.62 (Gemini 3.5 Flash's
    # published prices; 3.8 Flash is dearer), more than the $0.50 budget: the first is admitted (a key overshoots by one
    # request at most, as with model requests), the others are refused for what it holds. Without the hold all six
    # passed "a budget not already spent" and $3.75 was spent against $0.50.
    assert statuses.count(200) == 1 and statuses.count(429) == 5, [a.text[:200] for a in answers]
    refusal = next(a for a in answers if a.status_code == 429).json()["error"]
    assert refusal["status"] == "RESOURCE_EXHAUSTED", refusal
    one = _spent(ledger, "gemini-small" if key == GEMINI else "vertex-small", 1)
    assert Decimal("0.60") < one < Decimal("1.50"), one
    # Booked: the budget is spent now, and a later create is the refusal of a spent budget.
    again = httpx.post(gw + path, headers=headers, json=body, timeout=30)
    assert again.status_code == 429, again.text


def test_concurrent_creates_naming_a_storage_object_cannot_pass_a_small_budget(stack):
    gw, ledger = stack
    model = "projects/caller-project/locations/us-east5/publishers/google/models/gemini-3.8-flash"
    parts = [{"text": CONTRACT[:20000]}, {"fileData": {"fileUri": AGREEMENT, "mimeType": "application/pdf"}}]
    body = {"model": model, "ttl": "3600s", "contents": [{"role": "user", "parts": parts}]}
    answers = asyncio.run(_burst(gw + "/v1/projects/caller-project/locations/us-east5/cachedContents",
                                 {"authorization": f"Bearer {OBJECTS}"}, body, 3))
    # Google bills the object's tokens, which the gateway cannot count: up to all that Gemini 3.8 Flash reads, 1,048,576
    # tokens written and stored for the hour (over $2), held against the $1 budget until the answer says what it
    # held. The first is admitted, the others refused for what it holds. Held at the body's ~5,000 tokens ($0.02 each),
    # all three were, each free to cache an object of any size.
    statuses = sorted(a.status_code for a in answers)
    assert statuses.count(200) == 1 and statuses.count(429) == 2, [a.text[:200] for a in answers]
    _spent(ledger, "vertex-objects", 1)     # booked at its answer's usageMetadata, the hold settled
