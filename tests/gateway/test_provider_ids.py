"""Provider-side ids a tenant names in a request body (stored Responses items, containers, files, vector stores,
conversations, skills, Gemini files, storage objects) are its own or a 404, through a real `prefixgate serve`
in front of `prefixgate mock-providers` and the real SDKs: behind the gateway's one provider key, tenant B
naming tenant A's id would read A's data."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from google.genai._interactions_errors import NotFoundError as InteractionNotFound

from prefixgate.policies import hash_key
from tests.gateway.support_sdk_clients import claude, gemini, oai
from tests.support_stack import policy_env, running_stack

ACME_1, ACME_2, BETA = "pg-acme-one-0123456789", "pg-acme-two-0123456789", "pg-beta-0123456789ab"
POLICY = {
    "routes": [{"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]},
               {"name": "openai", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
               {"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]},
               {"name": "bedrock", "models": ["us.anthropic.*"], "targets": [{"upstream": "bedrock"}]}],
    # The operator made a vector store for acme's app outside the gateway and grants it to that key.
    "keys": [{"name": "acme-app", "key_sha256": hash_key(ACME_1), "tenant": "acme", "provider_ids": ["vs_acme_docs"]},
             {"name": "acme-batch", "key_sha256": hash_key(ACME_2), "tenant": "acme"},
             {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"}],
}
GPT, CLAUDE, GEMINI = "gpt-5.4", "claude-sonnet-5-5", "gemini-3.5-flash"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("provider_ids")
    env = policy_env(tmp, POLICY, ANTHROPIC_API_KEY="sk-ant-gateway-own-0000", AWS_ACCESS_KEY_ID="AKIDPROVIDERIDS0001",
                     AWS_SECRET_ACCESS_KEY="provider/ids+secret", AWS_REGION="us-east-1")
    with running_stack(tmp, env) as (gw, mock):
        yield gw, mock


def test_a_stored_responses_items_are_referenced_by_its_tenant_alone(stack):
    gw, _ = stack
    made = oai(gw, ACME_1).responses.create(model=GPT, input="Remember: the launch code is 4417.", store=True)
    output_item = made.output[0].id
    listed = oai(gw, ACME_1).responses.input_items.list(made.id).data[0].id
    for item in (output_item, listed):
        asked = [{"type": "item_reference", "id": item}, {"role": "user", "content": "Repeat everything above."}]
        # The other tenant: OpenAI's 404 for an item its organisation does not hold, from a request and a count.
        with pytest.raises(openai.NotFoundError) as refused:
            oai(gw, BETA).responses.create(model=GPT, input=asked)
        assert refused.value.body["message"] == f"Item with id '{item}' not found." and "4417" not in str(refused.value)
        with pytest.raises(openai.NotFoundError):
            oai(gw, BETA).responses.input_tokens.count(model=GPT, input=asked)
        # The same tenant's other key builds on it (the mock resolves the reference: the count includes the item).
        alone = oai(gw, ACME_2).responses.input_tokens.count(model=GPT, input=asked[1:]).input_tokens
        assert oai(gw, ACME_2).responses.input_tokens.count(model=GPT, input=asked).input_tokens > alone
        assert oai(gw, ACME_2).responses.create(model=GPT, input=asked).status == "completed"


def test_ids_the_gateway_never_saw_created_are_404s_to_every_tenant(stack):
    gw, _ = stack
    ask = {"role": "user", "content": "Summarise it."}
    # OpenAI: files in Responses parts and Chat parts, vector stores, conversations, code interpreter containers.
    responses_bodies = [
        {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-acme0001"}]}]},
        {"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-acme0002"}]}]},
        {"input": [ask], "tools": [{"type": "file_search", "vector_store_ids": ["vs_acme0003"]}]},
        {"input": [ask], "conversation": "conv_acme0004"},
        {"input": [ask], "prompt": {"id": "pmpt_operator", "variables": {
            "contract": {"type": "input_file", "file_id": "file-acme0018"}}}},
        {"input": [ask], "tools": [{"type": "code_interpreter", "container": "cntr_acme0005"}]},
        {"input": [ask], "tools": [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file-acme0006"]}}]},
        {"input": [ask], "tools": [{"type": "shell", "environment": {"type": "container_reference", "container_id": "cntr_acme0019"}}]},
        {"input": [ask], "tools": [{"type": "shell", "environment": {"type": "container_auto", "file_ids": ["file-acme0020"]}}]},
        {"input": [ask], "tools": [{"type": "shell", "environment": {
            "type": "container_auto", "skills": [{"type": "skill_reference", "skill_id": "skill_acme0021"}]}}]},
        {"input": [{"type": "computer_call", "id": "cu_1", "call_id": "c3", "status": "completed", "pending_safety_checks": [],
                    "action": {"type": "screenshot"}},
                   {"type": "computer_call_output", "call_id": "c3",
                    "output": {"type": "computer_screenshot", "file_id": "file-acme0022"}}]},
        {"input": [{"type": "function_call", "call_id": "c1", "name": "fetch", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "c1",
                    "output": [{"type": "input_file", "file_id": "file-acme0007"}]}]},
    ]
    for body in responses_bodies:
        with pytest.raises(openai.NotFoundError) as refused:
            oai(gw, BETA).responses.create(model=GPT, **body)
        assert "acme00" in refused.value.body["message"], body
    with pytest.raises(openai.NotFoundError) as refused:
        oai(gw, BETA).chat.completions.create(model=GPT, messages=[{"role": "user", "content": [
            {"type": "text", "text": "Summarise it."}, {"type": "file", "file": {"file_id": "file-acme0008"}}]}])
    assert refused.value.body["message"] == "File with id 'file-acme0008' not found."
    # Anthropic: Files API sources, container uploads, containers and custom skills.
    messages = [
        {"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "file", "file_id": "file_acme0009"}},
                                                   {"type": "text", "text": "Summarise it."}]}]},
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "file_acme0010"}},
                                                   {"type": "text", "text": "Describe it."}]}]},
        {"messages": [{"role": "user", "content": [{"type": "container_upload", "file_id": "file_acme0011"},
                                                   {"type": "text", "text": "Load it."}]}]},
        {"messages": [ask], "container": "container_acme0012"},
        {"messages": [ask], "container": {"skills": [{"type": "custom", "skill_id": "skill_acme0013", "version": "latest"}]}},
    ]
    for body in messages:
        with pytest.raises(anthropic.NotFoundError) as refused:
            claude(gw, BETA).messages.create(model=CLAUDE, max_tokens=64, **body)
        assert refused.value.body["error"]["type"] == "not_found_error" and "acme00" in str(refused.value), body
        if "container" not in body:     # count_tokens takes no container
            with pytest.raises(anthropic.NotFoundError):
                claude(gw, BETA).messages.count_tokens(model=CLAUDE, messages=body["messages"])
    # Gemini: an uploaded file (either spelling) and a Cloud Storage object, in a request and a count.
    google = gemini(gw, BETA)
    for uri in ("files/acme0014", "https://generativelanguage.googleapis.com/v1beta/files/acme0015", "gs://acme-bucket/q3.pdf"):
        contents = [genai_types.Content(role="user", parts=[
            genai_types.Part(file_data=genai_types.FileData(file_uri=uri, mime_type="application/pdf")),
            genai_types.Part(text="Summarise it.")])]
        with pytest.raises(genai_errors.ClientError) as refused:
            google.models.generate_content(model=GEMINI, contents=contents)
        assert refused.value.code == 404 and uri in refused.value.message
        with pytest.raises(genai_errors.ClientError) as refused:
            google.models.count_tokens(model=GEMINI, contents=contents)
        assert refused.value.code == 404
        with pytest.raises(genai_errors.ClientError) as refused:      # a cache of it would hand it to its builders
            google.caches.create(model=GEMINI, config=genai_types.CreateCachedContentConfig(contents=contents, ttl="600s"))
        assert refused.value.code == 404 and uri in refused.value.message
    search = genai_types.Tool(file_search=genai_types.FileSearch(file_search_store_names=["fileSearchStores/acme0016"]))
    with pytest.raises(genai_errors.ClientError) as refused:
        google.models.generate_content(model=GEMINI, contents="What does the contract say?",
                                       config=genai_types.GenerateContentConfig(tools=[search]))
    assert refused.value.code == 404 and "fileSearchStores/acme0016" in refused.value.message
    # Gemini's Interactions API: a document by `uri`.
    with pytest.raises(InteractionNotFound) as refused:
        google.interactions.create(model=GEMINI, input=[
            {"type": "document", "uri": "files/acme0017", "mime_type": "application/pdf"},
            {"type": "text", "text": "Summarise it."}])
    assert refused.value.status_code == 404 and "files/acme0017" in str(refused.value)
    # Bedrock Converse: an S3 object, read with the gateway's own role (boto3 sends a bearer key over HTTPS only).
    r = httpx.post(f"{gw}/model/us.anthropic.claude-sonnet-5-5/converse", headers={"authorization": f"Bearer {BETA}"},
                   json={"messages": [{"role": "user", "content": [
                       {"document": {"format": "pdf", "name": "q3", "source": {"s3Location": {"uri": "s3://acme-bucket/q3.pdf"}}}},
                       {"text": "Summarise it."}]}]})
    assert r.status_code == 404 and r.headers["x-amzn-errortype"].startswith("ResourceNotFoundException"), r.text
    assert "s3://acme-bucket/q3.pdf" in r.json()["message"]
    # What names nothing passes: a public URL, a tool whose schema has a `file_id` property, a call's arguments.
    assert google.models.generate_content(model=GEMINI, contents=[genai_types.Content(role="user", parts=[
        genai_types.Part(file_data=genai_types.FileData(file_uri="https://example.com/q3.pdf", mime_type="application/pdf")),
        genai_types.Part(text="Summarise it.")])]).text
    tool = {"type": "function", "name": "open_file", "parameters": {
        "type": "object", "properties": {"file_id": {"type": "string"}}, "required": ["file_id"]}}
    assert oai(gw, BETA).responses.create(model=GPT, tools=[tool], input=[
        {"type": "function_call", "call_id": "c2", "name": "open_file", "arguments": '{"file_id": "file-x"}'},
        {"type": "function_call_output", "call_id": "c2", "output": "opened"}]).status == "completed"


def test_an_id_the_operator_granted_to_a_key_is_that_keys_alone(stack):
    gw, _ = stack
    body = {"model": GPT, "input": [{"role": "user", "content": "What does the handbook say?"}],
            "tools": [{"type": "file_search", "vector_store_ids": ["vs_acme_docs"]}]}
    assert oai(gw, ACME_1).responses.create(**body).status == "completed"
    assert oai(gw, ACME_1).responses.input_tokens.count(**body).input_tokens > 0
    for other in (ACME_2, BETA):        # the grant is the key's: not its tenant's other keys, not another tenant
        with pytest.raises(openai.NotFoundError) as refused:
            oai(gw, other).responses.create(**body)
        assert refused.value.body["message"] == "Vector store with id 'vs_acme_docs' not found."


def test_paths_for_provider_side_objects_are_not_served(stack):
    gw, _ = stack
    auth = {"authorization": f"Bearer {BETA}"}
    # `/v1/files` and `/v1/containers` are served, each file and container its tenant's (test_files_api.py,
    # test_containers_api.py): one never made through the gateway is a 404.
    for method, path in (("GET", "/v1/files/file-acme0001/content"), ("GET", "/files/file-acme0001"),
                         ("GET", "/v1/conversations/conv_acme/items"), ("GET", "/v1/containers/cntr_acme/files"),
                         ("GET", "/v1/vector_stores/vs_acme/files"), ("GET", "/v1/batches"),
                         ("GET", "/v1/chat/completions/chatcmpl-acme"), ("GET", "/v1/conversations")):
        r = httpx.request(method, f"{gw}{path}", headers=auth)
        assert r.status_code in (404, 405) and "error" in r.json(), (method, path, r.text)
    # Gemini's Files API is served too: a file never uploaded through it is Google's answer to an unknown file (403),
    # an upload the gateway did not start its 404.
    r = httpx.get(f"{gw}/v1beta/files/acme0014", headers={"x-goog-api-key": BETA})
    assert r.status_code == 403 and r.json()["error"]["status"] == "PERMISSION_DENIED", r.text
    r = httpx.post(f"{gw}/upload/v1beta/files", headers={"x-goog-api-key": BETA})
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND", r.text
    google = gemini(gw, BETA)
    with pytest.raises(genai_errors.ClientError) as refused:
        google.files.get(name="files/acme0014")
    assert refused.value.code == 403
    claude_headers = {"x-api-key": BETA, "anthropic-version": "2023-06-01"}
    assert httpx.get(f"{gw}/v1/files/file_011acme", headers=claude_headers).json()["error"]["type"] == "not_found_error"
    for method, path in (("POST", "/v1/messages/batches"), ("GET", "/v1/messages/batches/msgbatch_acme/results")):
        r = httpx.request(method, f"{gw}{path}", headers=claude_headers, json={"requests": []} if method == "POST" else None)
        assert r.status_code in (404, 405) and r.json()["type"] == "error", (method, path, r.text)
    r = httpx.post(f"{gw}/v1beta/models/{GEMINI}:batchGenerateContent", headers={"x-goog-api-key": BETA}, json={})
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND", r.text


CODE_EXECUTION = {"type": "code_execution_20250825", "name": "code_execution"}


def test_a_claude_code_execution_container_is_its_tenants_alone(stack):
    gw, _ = stack
    ask = [{"role": "user", "content": "Compute the mean of 3, 5 and 10 in Python."}]
    made = claude(gw, ACME_1).messages.create(model=CLAUDE, max_tokens=64, tools=[CODE_EXECUTION], messages=ask)
    with claude(gw, ACME_1).messages.stream(model=CLAUDE, max_tokens=64, tools=[CODE_EXECUTION], messages=ask) as s:
        streamed = s.get_final_message()
    for container in (made.container.id, streamed.container.id):
        for named in (container, {"id": container}):
            with pytest.raises(anthropic.NotFoundError) as refused:
                claude(gw, BETA).messages.create(model=CLAUDE, max_tokens=64, tools=[CODE_EXECUTION], messages=ask,
                                                 container=named)
            assert refused.value.body["error"]["message"] == f"Container with id '{container}' not found."
        # The same tenant's other key runs in it again.
        again = claude(gw, ACME_2).messages.create(model=CLAUDE, max_tokens=64, tools=[CODE_EXECUTION], messages=ask,
                                                   container=container)
        assert again.container.id == container


def test_an_openai_code_interpreter_container_is_its_tenants_alone(stack):
    gw, _ = stack
    auto = [{"type": "code_interpreter", "container": {"type": "auto"}}]
    made = oai(gw, ACME_1).responses.create(model=GPT, tools=auto, input="Compute the mean of 3, 5 and 10.")
    with oai(gw, ACME_1).responses.stream(model=GPT, tools=auto, input="And their median?") as s:
        streamed = s.get_final_response()
    for response in (made, streamed):
        container = response.output[0].container_id
        named = [{"type": "code_interpreter", "container": container}]
        with pytest.raises(openai.NotFoundError) as refused:
            oai(gw, BETA).responses.create(model=GPT, tools=named, input="List the files you have.")
        assert refused.value.body["message"] == f"Container with id '{container}' not found."
        again = oai(gw, ACME_2).responses.create(model=GPT, tools=named, input="List the files you have.")
        assert again.output[0].container_id == container


def test_a_chat_audio_answer_is_named_again_by_its_tenant_alone(stack):
    gw, _ = stack
    spoken = {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}
    made = oai(gw, ACME_1).chat.completions.create(model=GPT, messages=[
        {"role": "user", "content": "Say the launch code, 4417, out loud."}], **spoken)
    audio_id = made.choices[0].message.audio.id
    turns = [{"role": "user", "content": "Say the launch code, 4417, out loud."},
             {"role": "assistant", "audio": {"id": audio_id}}, {"role": "user", "content": "Say it again."}]
    with pytest.raises(openai.NotFoundError) as refused:
        oai(gw, BETA).chat.completions.create(model=GPT, messages=turns[1:], **spoken)
    assert refused.value.body["message"] == f"Audio with id '{audio_id}' not found."
    again = oai(gw, ACME_2).chat.completions.create(model=GPT, messages=turns, **spoken)
    assert again.choices[0].message.audio.transcript


def test_ill_shaped_id_fields_are_never_a_500(stack):
    gw, _ = stack
    headers = {"x-api-key": BETA, "anthropic-version": "2023-06-01"}
    ask = [{"role": "user", "content": "Hello?"}]
    for container in ({"skills": 5}, {"id": 7}, {"skills": [3, {"type": "custom", "skill_id": 9}]}, 12):
        r = httpx.post(f"{gw}/v1/messages", headers=headers,
                       json={"model": CLAUDE, "max_tokens": 16, "messages": ask, "container": container})
        assert r.status_code < 500, (container, r.text)
    for body in ({"conversation": {"id": 4}}, {"prompt": {"id": "pmpt_x", "variables": 3}},
                 {"tools": [{"type": "file_search", "vector_store_ids": "vs_acme"}]}):
        r = httpx.post(f"{gw}/v1/responses", headers={"authorization": f"Bearer {BETA}"},
                       json={"model": GPT, "input": "Hello?", **body})
        assert r.status_code < 500, (body, r.text)
