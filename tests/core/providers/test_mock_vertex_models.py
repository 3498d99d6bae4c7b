"""mock-providers' Vertex AI answers as Vertex does (real AnthropicVertex and google-genai with vertexai=True):

- a model Vertex does not serve is Google's 404, in Google's shape for Claude too, naming the request's own
  publisher model path (verbatim in genkit-ai/genkit#4688, truefoundry/models#946); the mock served made-up ids
  (`claude-sonnet-4-6@20250929`: it turned `@` into `-` and dropped the date). Vertex's Claude ids
  (responses-bedrock-vertex.md §3.1): `claude-sonnet-4-5@20250929`, `claude-haiku-4-5@20251001`,
  `claude-opus-4-5@20251101`; newer models have no `@date`.
- `google=service_disabled` names the Vertex AI API (`aiplatform.googleapis.com`) and the path's project, not the
  Generative Language API; `google=location` and `google=free_tier`, the Gemini API's alone, are refused there.
"""

from __future__ import annotations

import anthropic
import pytest
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials

from prefixgate.simulation.mock.faults import FaultError, FaultPlan

pytestmark = pytest.mark.slow
PROJECT, LOCATION = "proj-models", "us-east5"
RPC = "type.googleapis.com/google.rpc."
ASK = {"max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}


def claude(url: str) -> anthropic.AnthropicVertex:
    return anthropic.AnthropicVertex(base_url=url + "/v1", region=LOCATION, project_id=PROJECT,
                                     access_token="mock-vertex-token", max_retries=0)


def gemini(url: str, fault: str | None = None) -> genai.Client:
    headers = {"x-mock-fault": fault} if fault else None
    return genai.Client(vertexai=True, project=PROJECT, location=LOCATION, credentials=Credentials("mock-vertex-token"),
                        http_options=types.HttpOptions(base_url=url, headers=headers))


def not_found(publisher: str, model: str) -> dict:
    return {"error": {"code": 404, "status": "NOT_FOUND", "message":
        f"Publisher Model `projects/{PROJECT}/locations/{LOCATION}/publishers/{publisher}/models/{model}` was not "
        "found or your project does not have access to it. Please ensure you are using a valid model version. For "
        "more information, see: https://cloud.google.com/vertex-ai/generative-ai/docs/learn/model-versions"}}


@pytest.mark.parametrize("model", [
    "claude-sonnet-4-6@20250929",       # a date on a model Vertex lists undated
    "claude-haiku-4-5@20250929",        # another model's date
    "claude-sonnet-5-5@20260101",
    "claude-haiku-4-5-20251001",        # the Claude API's spelling, not Vertex's
    "claude-sonnet-9-9",
])
def test_a_claude_model_vertex_does_not_serve_is_googles_404(mock_server, model):
    client = claude(mock_server[0])
    with pytest.raises(anthropic.NotFoundError) as created:
        client.messages.create(model=model, **ASK)
    assert created.value.body == not_found("anthropic", model)
    with pytest.raises(anthropic.NotFoundError) as streamed:
        client.messages.create(model=model, stream=True, **ASK)
    with pytest.raises(anthropic.NotFoundError) as counted:
        client.messages.count_tokens(model=model, messages=ASK["messages"])
    assert streamed.value.body == counted.value.body == created.value.body


@pytest.mark.parametrize("model", ["claude-haiku-4-5@20251001", "claude-sonnet-4-5@20250929",
                                   "claude-opus-4-5@20251101", "claude-sonnet-5-5", "claude-opus-4-6",
                                   "claude-haiku-4-5"])    # undated: Vertex's pages do not say it is refused
def test_vertexs_own_claude_ids_are_served(mock_server, model):
    client = claude(mock_server[0])
    answer = client.messages.create(model=model, **ASK)
    assert answer.model == model.replace("@", "-")
    assert client.messages.count_tokens(model=model, messages=ASK["messages"]).input_tokens > 0


def test_a_gemini_model_vertex_does_not_serve_is_googles_404(mock_server):
    client = gemini(mock_server[0])
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini-9.9-ultra", contents="Hi")
    assert refused.value.details == not_found("google", "gemini-9.9-ultra")
    with pytest.raises(errors.ClientError) as counted:
        client.models.count_tokens(model="gemini-9.9-ultra", contents="Hi")
    assert counted.value.details == refused.value.details
    with pytest.raises(errors.ClientError) as cached:
        client.caches.create(model="gemini-9.9-ultra", config=types.CreateCachedContentConfig(
            system_instruction="Be terse. " * 3000))
    assert cached.value.details == refused.value.details
    assert client.models.generate_content(model="gemini-3.5-flash", contents="Hi").text


def test_a_disabled_vertex_ai_api_names_vertex_and_the_paths_project(mock_server):
    client = gemini(mock_server[0], "google=service_disabled")     # held: a dropped client closes its pool
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    assert refused.value.code == 403 and refused.value.status == "PERMISSION_DENIED"
    activation = f"https://console.developers.google.com/apis/api/aiplatform.googleapis.com/overview?project={PROJECT}"
    assert refused.value.message.startswith(f"Vertex AI API has not been used in project {PROJECT} before or it is "
                                            f"disabled. Enable it by visiting {activation} then retry.")
    info = refused.value.details["error"]["details"][0]
    assert info == {"@type": RPC + "ErrorInfo", "reason": "SERVICE_DISABLED", "domain": "googleapis.com",
                    "metadata": {"consumer": f"projects/{PROJECT}", "service": "aiplatform.googleapis.com",
                                 "serviceTitle": "Vertex AI API", "activationUrl": activation,
                                 "containerInfo": PROJECT}}


@pytest.mark.parametrize("reason", ["location", "free_tier"])
def test_the_gemini_apis_own_refusals_are_refused_on_vertex(mock_server, reason):
    client = gemini(mock_server[0], f"google={reason}")
    with pytest.raises(errors.ClientError) as refused:
        client.models.generate_content(model="gemini-3.5-flash", contents="Hi")
    assert refused.value.code == 400 and refused.value.status == "INVALID_ARGUMENT"
    assert refused.value.message.startswith(f"x-mock-fault: google={reason} is ")
    assert "Vertex AI has no such answer" in refused.value.message
    with pytest.raises(anthropic.BadRequestError, match="Vertex AI has no such answer"):
        claude(mock_server[0]).messages.create(model="claude-sonnet-5-5", extra_headers={"x-mock-fault":
                                                                                         f"google={reason}"}, **ASK)
    with pytest.raises(FaultError, match=f"faults\\[0\\].fault: x-mock-fault: google={reason} is "):
        FaultPlan.from_config({"faults": [{"fault": f"google={reason}", "provider": "vertex"}]})
