"""A Gemini caller gets Google's own error: its `status` (FAILED_PRECONDITION for a country the API does not serve,
not the INVALID_ARGUMENT every 400 was rewritten to) and its `details` (RetryInfo, ErrorInfo, QuotaFailure, Help),
which were dropped; less what names the gateway's Google account, the project the tenant does not own
(docs/security.md): ErrorInfo's `metadata.consumer` is left out and `projects/NUMBER` / `project=NUMBER` read
`projects/-`. A caller of another format gets no Google details."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from google import genai
from google.genai import errors, types

from prefixgate.dialects.google_error import caller_details
from prefixgate.simulation.mock.faults import FaultRule, parse_fault
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import running_gateway, settings_for
from tests.support_services import ServerThread

PROJECT = "123456789012"     # the project number the mock's Google errors name (the gateway's account)
RPC = "type.googleapis.com/google.rpc."


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("GEMINI_API_KEY", "AIzaGatewayOwnGeminiKey0000000000")
    context = MockContext()
    try:
        with ServerThread(mock_app(context), log_level="critical") as mock, \
                running_gateway(settings_for(mock.url, tmp_path_factory.mktemp("google-errors"))) as gw:
            yield gw, context
    finally:
        mp.undo()


def _refused(stack, fault: str) -> errors.APIError:
    gw, context = stack
    rule = FaultRule(parse_fault(fault), provider="gemini")     # every try refused, the gateway's retries too
    context.faults.rules.append(rule)
    client = genai.Client(api_key="AIzaCallerKey000000000000000000",
                          http_options=types.HttpOptions(base_url=gw.url, api_version="v1beta",
                                                         retry_options=types.HttpRetryOptions(attempts=1)))
    try:
        with pytest.raises(errors.APIError) as refused:
            client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    finally:
        context.faults.rules.remove(rule)
    return refused.value


@pytest.mark.parametrize("reason,message", [
    ("location", "User location is not supported for the API use."),
    ("free_tier", "Gemini API free tier is not available in your country. Please enable billing on your project in "
                  "Google AI Studio."),
])
def test_a_country_google_does_not_serve_is_failed_precondition(stack, reason, message):
    refused = _refused(stack, f"google={reason}")
    assert refused.code == 400 and refused.status == "FAILED_PRECONDITION"
    assert refused.message.endswith(message)


def test_a_quota_refusal_keeps_its_retry_info_and_quota_failure(stack):
    refused = _refused(stack, "google=quota;retry_after=23")
    assert refused.code == 429 and refused.status == "RESOURCE_EXHAUSTED"
    details = refused.details["error"]["details"]
    assert [d["@type"] for d in details] == [RPC + "QuotaFailure", RPC + "Help", RPC + "RetryInfo"]
    assert details[2]["retryDelay"] == "23s"
    assert details[0]["violations"][0]["quotaId"] == "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"


def test_the_gateways_project_never_reaches_the_tenant(stack):
    refused = _refused(stack, "google=service_disabled")
    assert refused.code == 403 and refused.status == "PERMISSION_DENIED"
    info = refused.details["error"]["details"][0]
    assert info["@type"] == RPC + "ErrorInfo" and info["reason"] == "SERVICE_DISABLED"
    assert "consumer" not in info["metadata"]
    assert info["metadata"]["service"] == "generativelanguage.googleapis.com"
    assert PROJECT not in json.dumps(refused.details) and "AIzaGatewayOwn" not in json.dumps(refused.details)
    assert "?project=-" in info["metadata"]["activationUrl"]


def test_a_caller_of_another_format_gets_its_own_shape(stack):
    gw, context = stack
    context.faults.rules.append(FaultRule(parse_fault("google=location"), provider="gemini", times=1))
    client = openai.OpenAI(api_key="pg-k", base_url=gw.url + "/v1", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="gemini-3.5-flash", messages=[{"role": "user", "content": "Hi"}])
    assert refused.value.body["type"] == "invalid_request_error"
    assert set(refused.value.body) == {"message", "type", "param", "code"}


def test_the_mock_answers_googles_error_directly(stack):
    _, context = stack
    with ServerThread(mock_app(context), log_level="critical") as mock:
        answer = httpx.post(f"{mock.url}/v1beta/models/gemini-3.5-flash:generateContent",
                            headers={"x-goog-api-key": "AIzaDirect000000000000000000000", "x-mock-fault": "google=free_tier"},
                            json={"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]})
    assert answer.status_code == 400
    assert answer.json() == {"error": {"code": 400, "status": "FAILED_PRECONDITION", "message":
                                       "Gemini API free tier is not available in your country. Please enable billing "
                                       "on your project in Google AI Studio."}}


@pytest.mark.parametrize("sent,shown", [
    ("projects/my-gateway-project/locations/us-central1/publishers/google/models/gemini-3.5-flash",
     "projects/-/locations/us-central1/publishers/google/models/gemini-3.5-flash"),
    ("https://generativelanguage.googleapis.com/v1beta/models?key=gw-own-key-42&pageSize=5",
     "https://generativelanguage.googleapis.com/v1beta/models?key=***&pageSize=5"),
    ("Please enable billing on your project in Google AI Studio.",
     "Please enable billing on your project in Google AI Studio."),
    # Vertex reading a gs:// file: its service agent's address carries the project number
    ("service-123456789012@gcp-sa-aiplatform.iam.gserviceaccount.com does not have storage.objects.get access",
     "*** does not have storage.objects.get access"),
    ("gw-runner@my-gateway-project.iam.gserviceaccount.com lacks aiplatform.endpoints.predict",
     "*** lacks aiplatform.endpoints.predict"),
    ("https://console.developers.google.com/project/123456789012/apiui/credential",
     "https://console.developers.google.com/project/-/apiui/credential"),
    ("project:my-gateway-project", "project:-"),     # QuotaFailure.Violation.subject
    ("Permission denied on resource project gen-lang-client-0123456789.",
     "Permission denied on resource project -."),
    ("Consumer 'projects/123456789012' has been suspended.", "Consumer 'projects/-' has been suspended."),
])
def test_what_names_the_gateways_account_is_taken_out_and_nothing_else(sent, shown):
    details = [{"@type": RPC + "Help", "links": [{"description": "d", "url": sent}]}]
    assert caller_details({"status": "PERMISSION_DENIED", "details": details}, lambda text: text) == [
        {"@type": RPC + "Help", "links": [{"description": "d", "url": shown}]}]
