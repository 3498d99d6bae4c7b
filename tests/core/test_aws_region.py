"""Which Bedrock region the gateway calls (docs/bedrock.md, "Endpoint"): AWS_REGION, then
AWS_DEFAULT_REGION, then us-east-1, as the AWS SDKs read them; a policy upstream's own `region` wins."""

from __future__ import annotations

import pytest

from prefixgate.config import load_settings
from prefixgate.policies.load import builtin_upstreams
from prefixgate.policies.schema import Policy


def _bedrock_url(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "PREFIXGATE_BEDROCK_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return builtin_upstreams(load_settings()).get("bedrock").url


def test_aws_region_first(monkeypatch: pytest.MonkeyPatch) -> None:
    url = _bedrock_url(monkeypatch, AWS_REGION="eu-west-1", AWS_DEFAULT_REGION="ap-south-1")
    assert url == "https://bedrock-runtime.eu-west-1.amazonaws.com"


def test_then_aws_default_region(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _bedrock_url(monkeypatch, AWS_DEFAULT_REGION="ap-south-1") == "https://bedrock-runtime.ap-south-1.amazonaws.com"


def test_then_us_east_1(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _bedrock_url(monkeypatch) == "https://bedrock-runtime.us-east-1.amazonaws.com"


def test_a_policy_upstreams_region_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    policy = Policy.from_dict({"upstreams": {"bedrock-tokyo": {"kind": "bedrock", "region": "ap-northeast-1"}},
                               "routes": [{"name": "claude", "models": ["claude-sonnet-5-5"],
                                           "targets": [{"upstream": "bedrock-tokyo"}]}]},
                              builtin_upstreams(load_settings()))
    assert policy.upstreams["bedrock-tokyo"].url == "https://bedrock-runtime.ap-northeast-1.amazonaws.com"
