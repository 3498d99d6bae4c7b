"""A Vertex AI error names the project of the request's path (the gateway's own, not the tenant's) in whatever
words Google picks, not only as `projects/ID`: "Project `ID` is not allowed to use Publisher Model ...". The
gateway's project id reached a tenant through that prose; it is now scrubbed wherever the error says it
(docs/security.md) (real google-genai SDK in Vertex mode, a stub Vertex answering Google's error)."""

from __future__ import annotations

import json

import pytest
from google.genai import errors
from starlette.requests import Request
from starlette.responses import JSONResponse

from prefixgate.simulation.mock.faults import FaultRule, parse_fault
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.gateway.support_vertex import (
    LOCATION,
    PROJECT,
    gateway_over_stub_vertex,
    genai_vertex_caller,
    use_mock_vertex,
)
from tests.support_services import ServerThread

MODEL = "gemini-3.5-flash"


async def _refused(request: Request) -> JSONResponse:
    project = request.path_params["project"]
    model = f"projects/{project}/locations/{LOCATION}/publishers/google/models/{MODEL}"
    return JSONResponse({"error": {"code": 403, "status": "PERMISSION_DENIED",
                                   "message": f"Project `{project}` is not allowed to use Publisher Model `{model}`"}},
                        status_code=403)


def test_the_gateways_vertex_project_is_not_in_a_refusal_that_words_it_in_prose(tmp_path, monkeypatch):
    with gateway_over_stub_vertex(monkeypatch, tmp_path, _refused) as gw:
        client = genai_vertex_caller(gw)
        with pytest.raises(errors.APIError) as refused:
            client.models.generate_content(model=MODEL, contents="Hi")
    assert refused.value.code == 403 and refused.value.status == "PERMISSION_DENIED"
    assert "is not allowed to use Publisher Model" in refused.value.message
    assert PROJECT not in refused.value.message


def test_a_disabled_vertex_ai_api_reaches_the_tenant_without_the_gateways_project(tmp_path, monkeypatch):
    # The mock's Vertex names the Vertex AI API and the path's project (the gateway's) as Google does: ErrorInfo's
    # consumer, containerInfo, the activation URL and the prose.
    use_mock_vertex(monkeypatch)
    context = MockContext()
    context.faults.rules.append(FaultRule(parse_fault("google=service_disabled"), provider="vertex"))
    with ServerThread(mock_app(context)) as mock, \
            running_gateway(settings_for(mock.url, tmp_path, vertex_base_url=mock.url)) as gw:
        client = genai_vertex_caller(gw.url)
        with pytest.raises(errors.APIError) as refused:
            client.models.generate_content(model=MODEL, contents="Hi")
    assert refused.value.code == 403 and refused.value.status == "PERMISSION_DENIED"
    assert "Vertex AI API has not been used in project *** before" in refused.value.message
    info = refused.value.details["error"]["details"][0]
    assert info["reason"] == "SERVICE_DISABLED" and info["metadata"]["service"] == "aiplatform.googleapis.com"
    assert PROJECT not in json.dumps(refused.value.details) and "consumer" not in info["metadata"]
