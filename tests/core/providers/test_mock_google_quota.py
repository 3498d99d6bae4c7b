"""mock-providers' Google quota fault (`google=quota`) on the Gemini API names the model the request asked for, in
Google's shape for a spent per-model quota (ai.google.dev/gemini-api/docs/rate-limits: 429 RESOURCE_EXHAUSTED, a
QuotaFailure violation with quotaMetric, quotaId and quotaDimensions {location, model}, Help, RetryInfo); it named
gemini-2.5-flash whatever the model. Vertex AI answers the same 429 in its own words, as users quote it verbatim
(continuedev/continue#8967, google-gemini/gemini-cli#14811); the mock gave Vertex callers the Gemini API's. Read with
the real google-genai client."""

from __future__ import annotations

import uuid

import pytest
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials

pytestmark = pytest.mark.slow
RPC = "type.googleapis.com/google.rpc."
FAULT = {"x-mock-fault": "google=quota;retry_after=31"}


def refused(client: genai.Client, model: str) -> errors.ClientError:
    with pytest.raises(errors.ClientError) as err:
        client.models.generate_content(model=model, contents="Hi")
    return err.value


def vertex(url: str) -> genai.Client:
    return genai.Client(vertexai=True, project="proj-quota", location="us-east5", credentials=Credentials("mock-vertex-token"),
                        http_options=types.HttpOptions(base_url=url, headers=FAULT))


@pytest.mark.parametrize("model", ["gemini-3.1-pro-preview", "gemini-3.5-flash-lite"])
def test_the_quota_refusal_names_the_model_asked_for(mock_server, model):
    url, _ = mock_server
    client = genai.Client(api_key=f"AIza-quota-{uuid.uuid4().hex}",
                          http_options=types.HttpOptions(base_url=url, headers=FAULT))
    err = refused(client, model)
    assert err.code == 429 and err.status == "RESOURCE_EXHAUSTED"
    assert f"model: {model}\n" in err.message and "Please retry in 31s." in err.message
    assert "gemini-2.5-flash" not in str(err.details)
    quota, help_, retry = err.details["error"]["details"]
    assert quota["@type"] == RPC + "QuotaFailure" and help_["@type"] == RPC + "Help"
    violation = quota["violations"][0]
    assert violation["quotaMetric"] == "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    assert violation["quotaId"] == "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
    assert violation["quotaDimensions"] == {"location": "global", "model": model}
    assert retry == {"@type": RPC + "RetryInfo", "retryDelay": "31s"}


def test_vertex_words_its_quota_refusal_as_vertex_does(mock_server):
    url, _ = mock_server
    client = vertex(url)
    err = refused(client, "gemini-3.5-flash")
    assert err.details == {"error": {
        "code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "Resource exhausted. Please try again later. Please refer to "
                   "https://cloud.google.com/vertex-ai/generative-ai/docs/error-code-429 for more details."}}
    with pytest.raises(errors.ClientError) as cache:     # Vertex's cachedContents too
        client.caches.create(model="gemini-3.5-flash", config=types.CreateCachedContentConfig(
            system_instruction="Be terse. " * 3000))
    assert (cache.value.code, cache.value.details) == (429, err.details)


def test_a_cache_creation_refused_for_quota_names_the_model_by_its_id(mock_server):
    url, _ = mock_server
    client = genai.Client(api_key=f"AIza-quota-{uuid.uuid4().hex}", http_options=types.HttpOptions(
        base_url=url, api_version="v1beta", headers=FAULT))
    with pytest.raises(errors.ClientError) as err:      # the body names it `models/gemini-3.1-pro-preview`
        client.caches.create(model="gemini-3.1-pro-preview", config=types.CreateCachedContentConfig(
            system_instruction="Be terse. " * 3000))
    dimensions = err.value.details["error"]["details"][0]["violations"][0]["quotaDimensions"]
    assert dimensions == {"location": "global", "model": "gemini-3.1-pro-preview"}
