"""A route's `prompt_cache_key: derive | keep` through the gateway with the real openai SDK (Responses and Chat
Completions) against mock-providers, which routes by the prompt's head plus prompt_cache_key as OpenAI documents.
Two "sessions" of one tenant with their own caller keys and the same instructions: under `derive` the second
session's first request reads the instructions from cache, under `keep` it does not; another tenant's session
never reads the first tenant's cache, even with the same caller key."""

from __future__ import annotations

import httpx
import openai
import pytest

from prefixgate.ledger import read_records
from tests.gateway.support_response_cache import KEYS, cache_stack
from tests.support_services import wait_until

# ~2,000 tokens of fixed instructions: past OpenAI's 1,024-token minimum and its ~256-token routing head.
INSTRUCTIONS = "You review pull requests for the payments service. " + " ".join(
    f"Rule {i}: check that module {i} keeps its invariants and logs every refund it issues." for i in range(120))


def policy(mode: str) -> dict:
    return {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}], "prompt_cache_key": mode}],
            "keys": [{"name": "acme-app", "key_env": "ACME_KEY", "tenant": "acme"},
                     {"name": "globex-app", "key_env": "GLOBEX_KEY", "tenant": "globex"}]}


def ask(url: str, api: str, caller: str, session: str, question: str) -> int:
    """One session's first request; the cached tokens the answer reports."""
    client = openai.OpenAI(api_key=KEYS[caller], base_url=url + "/v1", max_retries=0)
    if api == "responses":
        r = client.responses.create(model="gpt-5.4", instructions=INSTRUCTIONS, input=question, prompt_cache_key=session)
        return r.usage.input_tokens_details.cached_tokens
    c = client.chat.completions.create(model="gpt-5.4", prompt_cache_key=session, messages=[
        {"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": question}])
    return c.usage.prompt_tokens_details.cached_tokens


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_derive_shares_instructions_across_sessions_keep_does_not_and_tenants_never_do(tmp_path, api):
    reads: dict[str, list[int]] = {}
    for mode in ("derive", "keep"):
        (tmp_path / mode).mkdir()
        with cache_stack(tmp_path / mode, policy(mode)) as (_, gw, settings):
            reads[mode] = [ask(gw.url, api, "ACME_KEY", "session-1", "Review PR 101."),
                           ask(gw.url, api, "ACME_KEY", "session-2", "Review PR 202."),
                           # Another tenant, the same caller key as the first session and the same instructions.
                           ask(gw.url, api, "GLOBEX_KEY", "session-1", "Review PR 303.")]
            wait_until(lambda s=settings: len(read_records(s.ledger_path)) >= 3, 10, "three ledger records")
            records = read_records(settings.ledger_path)
            # The dashboard's request detail shows the mode and the key sent.
            detail = httpx.get(gw.url + f"/api/requests/{records[1]['id']}", params={"range": "15m"}).json()
            assert (detail["cache_key_mode"], detail["prompt_cache_key"]) == (mode, records[1]["prompt_cache_key"])
        keys = [r["prompt_cache_key"] for r in records]
        assert [r["cache_key_mode"] for r in records] == [mode] * 3
        if mode == "derive":
            # One key per tenant and prefix, a hash that names neither the tenant nor the prompt.
            assert keys[0] == keys[1] != keys[2] and all(k.startswith("pg-") and len(k) == 27 for k in keys)
            assert not any(word in k for k in keys for word in ("acme", "globex", "session", "payments"))
            assert any("replaces the caller's" in line for line in records[1]["explanation"])
        else:
            assert keys == ["session-1", "session-2", "session-1"]
            assert any("kept as the caller sent it" in line for line in records[1]["explanation"])
    assert reads["derive"][0] == 0 and reads["derive"][1] >= 1024     # the second session reads the instructions
    assert reads["derive"][2] == 0                                       # the other tenant never does
    # Each caller key routes to its own machine. (The other tenant, sending the same caller key as acme's first
    # session through the same upstream credential, reads acme's entry under `keep`: only `derive` separates them.)
    assert reads["keep"][:2] == [0, 0]
