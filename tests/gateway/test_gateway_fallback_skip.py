"""A route whose first target fails and whose next cannot take the request (no credentials for it on the
gateway): the caller gets the first target's failure, and its record is that target's, not a 401 for a key the
caller never chose (the openai SDK would raise AuthenticationError, blaming the caller's own key)."""

from __future__ import annotations

import openai
import pytest

from prefixgate.ledger import read_records
from tests.gateway.support_gateway import policy_stack
from tests.support_services import wait_until

POLICY = {
    "upstreams": {"anthropic-unkeyed": {"kind": "anthropic", "url": "http://127.0.0.1:9", "api_key_env": "PG_TEST_UNSET_KEY"}},
    "routes": [{"name": "fallback", "models": ["fallback"], "retry": {"attempts": 1},
                "targets": [{"upstream": "openai", "model": "gpt-5.4"},
                            {"upstream": "anthropic-unkeyed", "model": "claude-sonnet-5-5"}]}],
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with policy_stack(tmp_path_factory.mktemp("fallback-skip"), POLICY) as parts:
        yield parts


def test_a_skipped_last_target_does_not_hide_the_failure_before_it(stack, monkeypatch):
    up, gw, settings = stack
    monkeypatch.delenv("PG_TEST_UNSET_KEY", raising=False)
    up.fail("500")
    caller = openai.OpenAI(api_key="caller", base_url=gw.url + "/v1", max_retries=0)
    with pytest.raises(openai.InternalServerError) as exc:
        caller.chat.completions.create(model="fallback", messages=[{"role": "user", "content": "Hi"}])
    assert exc.value.status_code == 500
    rid = exc.value.response.headers["x-prefixgate-request-id"]
    wait_until(lambda: any(r["id"] == rid for r in read_records(settings.ledger_path)), 5, "ledger record")
    [rec] = [r for r in read_records(settings.ledger_path) if r["id"] == rid]
    assert (rec["status"], rec["target"]) == (500, "openai")
    assert any(line.startswith("skip anthropic-unkeyed: no credentials") for line in rec["explanation"])
