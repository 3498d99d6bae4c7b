"""A file lives in the provider account it was uploaded to: with two OpenAI accounts behind the gateway (one
upstream each), a tenant's later calls about the file go to the account that holds it, whichever of the
tenant's keys makes them (real openai SDK, gateway and mock in-process; the mock keeps each key's files apart,
as OpenAI keeps each organisation's)."""

from __future__ import annotations

import openai
import pytest

from prefixgate.policies import hash_key
from tests.gateway.support_gateway import gateway_over_mock

ON_A, ON_B, BETA_ON_A = "pg-acme-on-a-0123456", "pg-acme-on-b-0123456", "pg-beta-on-a-0123456"


def test_a_files_later_calls_go_to_the_account_that_holds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_KEY_A", "sk-account-a-000000")
    monkeypatch.setenv("OPENAI_KEY_B", "sk-account-b-000000")

    def policy(mock: str) -> dict:
        return {
            "upstreams": {"openai-a": {"kind": "openai", "url": mock + "/v1", "api_key_env": "OPENAI_KEY_A"},
                          "openai-b": {"kind": "openai", "url": mock + "/v1", "api_key_env": "OPENAI_KEY_B"}},
            "routes": [{"name": "a", "models": ["gpt-5.4"], "targets": [{"upstream": "openai-a"}]},
                       {"name": "b", "models": ["gpt-5.4-mini"], "targets": [{"upstream": "openai-b"}]}],
            "keys": [{"name": "acme-a", "key_sha256": hash_key(ON_A), "tenant": "acme", "routes": ["a"]},
                     {"name": "acme-b", "key_sha256": hash_key(ON_B), "tenant": "acme", "routes": ["b"]},
                     {"name": "beta-a", "key_sha256": hash_key(BETA_ON_A), "tenant": "beta", "routes": ["a"]}]}
    with gateway_over_mock(tmp_path, policy) as gw:
        def client(key: str) -> openai.OpenAI:
            return openai.OpenAI(base_url=f"{gw.url}/v1", api_key=key, max_retries=0)

        made = client(ON_A).files.create(file=("plan.txt", b"the plan"), purpose="user_data")
        # Its tenant's key whose routes reach only account B still reads it where it lives (account A).
        assert client(ON_B).files.retrieve(made.id).filename == "plan.txt"
        assert client(ON_B).files.content(made.id).read() == b"the plan"
        # Another tenant on account A itself: the gateway's 404, though the account holds the file.
        with pytest.raises(openai.NotFoundError):
            client(BETA_ON_A).files.retrieve(made.id)
        assert client(ON_B).files.delete(made.id).deleted is True
        with pytest.raises(openai.NotFoundError):
            client(ON_A).files.retrieve(made.id)
