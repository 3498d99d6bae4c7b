"""Which Bedrock region the gateway calls (docs/bedrock.md, "Endpoint"): AWS_REGION, then
AWS_DEFAULT_REGION, then us-east-1, as the AWS SDKs read them; a policy upstream's own `region` wins."""

from __future__ import annotations

import asyncio

import pytest
from botocore.credentials import Credentials

from prefixgate import sigv4
from prefixgate.config import load_settings
from prefixgate.dialects import converse
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


@pytest.mark.parametrize("host,region", [
    ("vpce-0a1b2c3d4e5f67890-abcd1234.bedrock-runtime.eu-central-1.vpce.amazonaws.com", "eu-central-1"),
    ("bedrock-runtime.cn-north-1.amazonaws.com.cn", "cn-north-1"),
    ("bedrock-runtime-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
])
def test_a_request_to_an_aws_host_is_signed_for_the_region_the_host_names(monkeypatch: pytest.MonkeyPatch,
                                                                          host: str, region: str) -> None:
    """An interface VPC endpoint (AWS PrivateLink's DNS name), a China region or a FIPS endpoint: AWS refuses a
    signature whose credential scope names another region, whatever AWS_REGION says on the gateway."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    state = {"aws": sigv4.CredentialChain(Credentials("AKIDREGION", "region/secret"))}
    signed = asyncio.run(converse.WIRE.sign("POST", f"https://{host}/model/m/converse", {"host": host}, b"{}", state))
    assert f"/{region}/bedrock/aws4_request" in signed["Authorization"]
