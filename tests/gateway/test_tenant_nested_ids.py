"""Provider-side ids named in less travelled places, through a real `prefixgate serve` in front of
`prefixgate mock-providers`: a Gemini function response carries the function's JSON result (`response`, free-form)
and, since Gemini 3, media parts of its own (`parts`: `inlineData`, `fileData`; google-genai's
`FunctionResponsePart`), which the model reads as it reads a top-level part; Vertex grounding (`tools[].retrieval`)
reads what the gateway's Google project holds (RAG corpora, Vertex AI Search data stores and engines, and the Secret
Manager secret or the service account an external search API is called with), which no tenant created through the
gateway. And Google's bodies as the gateway reads them and as Google runs them: proto3 JSON takes a field by its
lowerCamelCase or its proto name, so a body spelling one field both ways had the gateway check (or cap) one value
while Google may run the other; it is refused, as protobuf's own JSON parser refuses it (`should not have multiple
"file_data" fields`). Vertex's model router (`generationConfig.routingConfig`, google-genai's `routing_config`)
answers with a model the URL does not name, so a keyed caller may not use it: its route chooses its model."""

from __future__ import annotations

import io
import json
import time

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


VERTEX = "/v1/projects/caller-project/locations/us-east5/publishers/google/models/gemini-3.8-flash"


def _refused(answer: httpx.Response, field: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and field in error["message"], error


def test_a_part_naming_a_file_in_both_spellings_is_refused(stack):
    gw = stack
    acme = gemini(gw, ACME_1)     # held while used: the SDK closes its HTTP client when a Client is collected
    made = acme.files.upload(file=io.BytesIO(REPORT), config={"mime_type": "text/plain", "display_name": "q3"})
    # The gateway checked `fileData` (a public URL, anyone's) and sent the part; Google's parser could keep `file_data`,
    # acme's file read with the gateway's key for beta.
    public = {"fileUri": "https://www.example.com/brochure.txt", "mimeType": "text/plain"}
    part = {"fileData": public, "file_data": {"file_uri": made.uri, "mime_type": "text/plain"}}
    plain = json.dumps({"contents": [{"role": "user", "parts": [{"text": "Summarise this."}, part]}]})
    # The proto's name written with a JSON escape (`file_data` to every JSON parser), beside camelCase fields alone.
    escaped = json.dumps({"contents": [{"role": "user", "parts": [{"text": "Summarise this."}, {
        "fileData": public, "file_data": {"fileUri": made.uri, "mimeType": "text/plain"}}]}]}).replace(
        '"file_data"', '"file\\u005fdata"')
    for action in ("generateContent", "countTokens"):   # a count forwarded as it came would tell the file's size
        for body in (plain, escaped):
            answer = httpx.post(f"{gw}/v1beta/models/{MODEL}:{action}", timeout=30, content=body,
                                headers={"x-goog-api-key": BETA, "content-type": "application/json"})
            _refused(answer, "contents.0.parts.1.fileData")
            assert "north 4.1M" not in answer.text
    # A JSON Schema's properties are the caller's names: `user_id` beside `userId` is two fields of its own.
    tools = [{"functionDeclarations": [{"name": "lookup", "description": "Find a user.", "parameters": {
        "type": "OBJECT", "properties": {"user_id": {"type": "STRING"}, "userId": {"type": "STRING"}}}}]}]
    asked = {"contents": [{"role": "user", "parts": [{"text": "Who is user 7?"}]}], "tools": tools}
    sent = httpx.post(f"{gw}/v1beta/models/{MODEL}:generateContent", headers={"x-goog-api-key": BETA}, json=asked,
                      timeout=30)
    assert sent.status_code == 200, sent.text


def test_a_cache_lifetime_in_both_spellings_is_refused(stack):
    # max_cache_ttl_s (a day by default) capped `expireTime`, an hour away; Google could keep `expire_time`, a month
    # of storage the operator pays by the hour.
    gw = stack
    hour, month = (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + s)) for s in (3600, 30 * 86400))
    body = {"model": f"models/{MODEL}", "expireTime": hour, "expire_time": month,
            "contents": [{"role": "user", "parts": [{"text": "The contract. " * 2000}]}]}
    answer = httpx.post(f"{gw}/v1beta/cachedContents", headers={"x-goog-api-key": BETA}, json=body, timeout=30)
    _refused(answer, "expireTime")


@pytest.mark.parametrize("config", [
    {"generationConfig": {"routingConfig": {"manualMode": {"modelName": "gemini-3.8-pro"}}}},
    {"generationConfig": {"routingConfig": {"autoMode": {"modelRoutingPreference": "PRIORITIZE_QUALITY"}}}},
    # google-genai sends its routing_config as the caller built it: the proto's own names inside.
    {"generation_config": {"routing_config": {"manual_mode": {"model_name": "gemini-3.8-pro"}}}},
], ids=["manual", "auto", "proto-names"])
def test_a_keyed_caller_cannot_hand_its_model_to_vertexs_router(stack, config):
    # Vertex's model router answers with the model it picks or is named, not the URL's: a key whose route allows
    # Flash would get Pro, held and priced as Flash.
    gw = stack
    body = {"contents": [{"role": "user", "parts": [{"text": "Prove the four colour theorem."}]}], **config}
    answer = httpx.post(f"{gw}{VERTEX}:generateContent", headers={"authorization": f"Bearer {BETA}"}, json=body,
                        timeout=30)
    _refused(answer, "generationConfig.routingConfig")
