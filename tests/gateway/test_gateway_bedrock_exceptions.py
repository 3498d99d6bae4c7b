"""Bedrock's exceptions reach a boto3 caller as the class AWS would raise (bedrock-runtime's service model: each
exception's name and HTTP status), whether Bedrock itself answered it through the gateway or mock-providers
stands in for Bedrock: a model timeout is never a ValidationException, a model that is not ready never a
ThrottlingException."""

from __future__ import annotations

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.test_gateway_bedrock import KEY, SECRET, aws_env  # noqa: F401 (a fixture)
from tests.support_services import ServerThread

pytestmark = pytest.mark.slow

MESSAGES = [{"role": "user", "content": [{"text": "Where is order 7?"}]}]
# What the stub Bedrock answers for each model: (HTTP status, exception name), as bedrock-runtime's model lists them.
ANSWERS = {"us.anthropic.claude-sonnet-5-5": (429, "ModelNotReadyException"),
           "eu.anthropic.claude-sonnet-5-5": (400, "ServiceQuotaExceededException"),
           "global.anthropic.claude-sonnet-5-5": (424, "ModelErrorException")}


async def _refuse(request: Request) -> JSONResponse:
    status, name = ANSWERS[request.path_params["model"]]
    return JSONResponse({"message": f"{name} from Bedrock"}, status_code=status,
                        headers={"x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"})


def runtime(url: str):
    return boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=url, aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, config=Config(retries={"max_attempts": 1}))


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("model", list(ANSWERS))
def test_bedrocks_own_exception_reaches_boto3_through_the_gateway(tmp_path, model):
    upstream = Starlette(routes=[Route("/model/{model:path}/converse", _refuse, methods=["POST"])])
    with ServerThread(upstream) as up:
        settings = settings_for(up.url, tmp_path, bedrock_base_url=up.url)
        policy = policy_for(settings, {"routes": [{"name": "bedrock", "models": ["*.anthropic.*"],
                                                   "targets": [{"upstream": "bedrock"}], "retry": {"attempts": 1}}]})
        with running_gateway(settings, policy=policy) as gateway:
            with pytest.raises(botocore.exceptions.ClientError) as err:
                runtime(gateway.url).converse(modelId=model, messages=MESSAGES)
    status, name = ANSWERS[model]
    assert err.value.response["Error"]["Code"] == name
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == status


@pytest.mark.usefixtures("aws_env")
@pytest.mark.parametrize("fault,name", [("status=408", "ModelTimeoutException"), ("status=424", "ModelErrorException")])
def test_mock_bedrocks_injected_statuses_are_bedrocks_exceptions(fault, name):
    plan = FaultPlan.from_config({"faults": [{"fault": fault, "provider": "bedrock"}]})
    with ServerThread(mock_app(MockContext(faults=plan))) as mock:
        with pytest.raises(botocore.exceptions.ClientError) as err:
            runtime(mock.url).converse(modelId="us.anthropic.claude-sonnet-5-5", messages=MESSAGES)
    assert err.value.response["Error"]["Code"] == name
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == int(fault.split("=")[1])
