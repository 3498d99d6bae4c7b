"""Provider-side ids named in less travelled places, through a real `prefixgate serve` in front of
`prefixgate mock-providers`: a Gemini function response carries the function's JSON result (`response`, free-form)
and, since Gemini 3, media parts of its own (`parts`: `inlineData`, `fileData`; google-genai's
`FunctionResponsePart`), which the model reads as it reads a top-level part; Vertex grounding (`tools[].retrieval`)
reads what the gateway's Google project holds (RAG corpora, Vertex AI Search data stores and engines, and the Secret
Manager secret or the service account an external search API is called with), which no tenant created through the
gateway."""

from __future__ import annotations

import io

import httpx
import pytest

from prefixgate.policies import hash_key
from tests.gateway.support_sdk_clients import gemini
from tests.support_stack import policy_env, running_stack

ACME_1, ACME_2, BETA = "pg-nested-acme-one-01234", "pg-nested-acme-two-01234", "pg-nested-beta-012345678"
POLICY = {"routes": [{"name": "vertex", "models": ["gemini-3.8-flash"], "targets": [{"upstream": "vertex"}]},
                    {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
          "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME_1), "tenant": "acme"},
                   {"name": "acme-batch", "key_sha256": hash_key(ACME_2), "tenant": "acme"},
                   {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"}]}
MODEL = "gemini-3.5-flash"
REPORT = b"Q3 revenue by region, confidential: " + b"north 4.1M, south 2.7M, east 3.3M. " * 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nested_ids")
    with running_stack(tmp, policy_env(tmp, POLICY)) as (gw, _):
        yield gw


def _ask(gw: str, key: str, part: dict) -> httpx.Response:
    contents = [{"role": "user", "parts": [{"text": "Fetch the quarterly report."}]},
                {"role": "model", "parts": [{"functionCall": {"name": "fetch_report", "args": {"quarter": "Q3"}},
                                             "thoughtSignature": "skip_thought_signature_validator"}]},
                {"role": "user", "parts": [part]}]
    return httpx.post(f"{gw}/v1beta/models/{MODEL}:generateContent", headers={"x-goog-api-key": key},
                      json={"contents": contents}, timeout=30)


def test_a_file_named_in_a_function_responses_parts_is_its_tenants_alone(stack):
    gw = stack
    acme = gemini(gw, ACME_1)   # held while used: the SDK closes its HTTP client when a Client is collected
    made = acme.files.upload(file=io.BytesIO(REPORT), config={"mime_type": "text/plain", "display_name": "q3"})
    data = {"fileData": {"fileUri": made.uri, "mimeType": "text/plain"}}
    top_level = _ask(gw, BETA, data)
    assert top_level.status_code in (403, 404), top_level.text
    for spelling in ({"functionResponse": {"name": "fetch_report", "response": {"ok": True}, "parts": [data]}},
                     {"function_response": {"name": "fetch_report", "response": {"ok": True},
                                            "parts": [{"file_data": {"file_uri": made.uri, "mime_type": "text/plain"}}]}}):
        nested = _ask(gw, BETA, spelling)
        # The same refusal as a top-level part's: the gateway sent it on, and the shared project's key read the file.
        assert (nested.status_code, nested.json()) == (top_level.status_code, top_level.json()), nested.text
        assert "north 4.1M" not in nested.text
        # The owner's tenant names it there as it names it anywhere.
        own = _ask(gw, ACME_2, spelling)
        assert own.status_code == 200, own.text


# Resources of the gateway's project, by the names Vertex's REST reference gives them (Tool.retrieval).
PROJECT = "projects/gw-project/locations"
GROUNDING = [
    ({"vertexRagStore": {"ragResources": [{"ragCorpus": f"{PROJECT}/us-east5/ragCorpora/4611686018427387904"}]}},
     "ragCorpora/4611686018427387904"),
    ({"vertex_rag_store": {"rag_corpora": [f"{PROJECT}/us-east5/ragCorpora/4611686018427387905"]}},
     "ragCorpora/4611686018427387905"),
    ({"vertexAiSearch": {"datastore": f"{PROJECT}/global/collections/default_collection/dataStores/hr-docs"}},
     "dataStores/hr-docs"),
    ({"vertexAiSearch": {"engine": f"{PROJECT}/global/collections/default_collection/engines/hr-search"}},
     "engines/hr-search"),
    ({"vertexAiSearch": {"dataStoreSpecs": [{"dataStore": f"{PROJECT}/global/collections/c/dataStores/payroll"}]}},
     "dataStores/payroll"),
    # An external search API of the caller's choosing, called with the key kept in the gateway's Secret Manager.
    ({"externalApi": {"endpoint": "https://search.beta.example/_search", "apiSpec": "ELASTIC_SEARCH",
                      "elasticSearchParams": {"index": "docs", "searchTemplate": "t"},
                      "apiAuth": {"apiKeyConfig": {"apiKeySecret": "projects/gw-project/secrets/es-key/versions/1"}}}},
     "secrets/es-key/versions/1"),
    ({"externalApi": {"endpoint": "https://search.beta.example/_search", "apiSpec": "SIMPLE_SEARCH",
                      "authConfig": {"authType": "GOOGLE_SERVICE_ACCOUNT_AUTH", "googleServiceAccountConfig": {
                          "serviceAccount": "search-caller@gw-project.iam.gserviceaccount.com"}}}},
     "search-caller@gw-project.iam.gserviceaccount.com"),
]


@pytest.mark.parametrize(("retrieval", "named"), GROUNDING, ids=[n for _, n in GROUNDING])
def test_vertex_grounding_never_reads_what_the_gateways_project_holds(stack, retrieval, named):
    gw = stack
    url = f"{gw}/v1/projects/caller-project/locations/us-east5/publishers/google/models/gemini-3.8-flash:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "What is the parental leave policy?"}]}],
            "tools": [{"retrieval": retrieval}]}
    for key in (BETA, ACME_1):      # no tenant created it through the gateway: every keyed caller is refused
        answer = httpx.post(url, headers={"authorization": f"Bearer {key}"}, json=body, timeout=30)
        assert answer.status_code == 404, answer.text
        error = answer.json()["error"]
        assert error["status"] == "NOT_FOUND" and named in error["message"], error


def test_vertex_never_writes_generated_media_into_the_gateways_buckets(stack):
    # google-genai's `generation_output_config` (Vertex only) is the body's `outputConfig`: Vertex writes the media
    # it generates under `outputUriPrefix` with the project's own service agent, so a tenant could fill or overwrite
    # any bucket the gateway's project writes to. A Cloud Storage location no tenant created through the gateway is
    # the 404 a `gs://` object named as input gets.
    gw = stack
    url = f"{gw}/v1/projects/caller-project/locations/us-east5/publishers/google/models/gemini-3.8-flash:generateContent"
    for config in ({"outputConfig": {"outputUriPrefix": "gs://gw-project-media/acme/"}},
                   {"output_config": {"output_uri_prefix": "gs://gw-project-media/acme/"}}):
        body = {"contents": [{"role": "user", "parts": [{"text": "Draw the quarterly chart."}]}], **config}
        answer = httpx.post(url, headers={"authorization": f"Bearer {BETA}"}, json=body, timeout=30)
        assert answer.status_code == 404, answer.text
        error = answer.json()["error"]
        assert error["status"] == "NOT_FOUND" and "gs://gw-project-media/acme/" in error["message"], error
