"""Provider-side ids a tenant names in a model request, and those an answer creates.

Behind the gateway's own provider key every tenant is one account to the provider, so an id that account
holds (a container, a stored Responses item, an uploaded file, a vector store, a conversation, a skill, an
object in the operator's storage) reads its data for whoever names it. Ids an answer creates (a container a
code tool started, the items of a stored response, the files its code execution wrote) and files uploaded
through the gateway (endpoints_files, endpoints_gemini_files) are recorded as the caller's tenant's
(`ownership`); a request naming one is let through only for that tenant. The gateway serves no endpoint
that creates vector stores, conversations, skills or storage objects, so every such id (and a file not
uploaded through it) belongs to nobody and is a 404 to every keyed caller (fail closed, as `ownership` treats every id it never saw created) unless the operator
grants it to the caller's key (`provider_ids` in the policy: a vector store or file it made for that tenant);
an open gateway has one party and checks nothing.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator
from typing import Any, NamedTuple

from prefixgate.dialects.proto_json import field, snake
from prefixgate.errors import RequestError
from prefixgate.gateway.stored_ids import StoredIds
from prefixgate.ir import Conversation

CONTAINER = "container"     # OpenAI code interpreter's `cntr_...`, Anthropic code execution's `container_...`
ITEM = "response_item"      # a stored Responses item (`msg_...`, `fc_...`), named by an `item_reference`
FILE = "file"               # uploaded through the gateway's `/v1/files`
# Never created through the gateway: only ever refused to keyed callers.
VECTOR_STORE, CONVERSATION, SKILL, STORAGE = "vector_store", "conversation", "skill", "storage_object"
SEARCH_STORE = "file_search_store"      # Gemini File Search's `fileSearchStores/...`
# Vertex grounding (`tools[].retrieval`) reads the gateway's Google project: its RAG corpora, its Vertex AI Search data
# stores and engines, the Secret Manager secret or service account an external search API is called with.
RAG_CORPUS, DATA_STORE, SECRET, SERVICE_ACCOUNT = "rag_corpus", "data_store", "secret", "service_account"
AUDIO = "audio"             # a Chat Completions audio answer, named again by an assistant message's `audio.id`
_NOUNS = {CONTAINER: "Container", ITEM: "Item", FILE: "File", VECTOR_STORE: "Vector store",
          CONVERSATION: "Conversation", SKILL: "Skill", STORAGE: "Storage object", SEARCH_STORE: "File search store",
          AUDIO: "Audio", RAG_CORPUS: "RAG corpus", DATA_STORE: "Data store", SECRET: "Secret",
          SERVICE_ACCOUNT: "Service account"}
_NAMED = "provider_ids"     # the ids a block names, in its `facts()`
_MEDIA = frozenset({"image", "document", "audio", "video"})     # Interactions content that may name a file by `uri`
# Blocks that hold only what the model reads or wrote (text, thinking, a tool call's free-form arguments).
_UNNAMING = frozenset({"text", "thinking", "tool_call"})
# Free-form JSON inside a block (schemas, a function's arguments or result): a key named `file_id` there is data.
# A Gemini `functionResponse` is walked past its `response`: its `parts` are media the model reads (`fileData`).
_FREE_FORM = frozenset({"parameters", "input_schema", "schema", "properties", "input", "args", "arguments",
                        "response", "functionCall", "function_call"})


class Named(NamedTuple):
    kind: str
    ident: str
    field: str


def named_ids(conv: Conversation) -> Iterator[Named]:
    """Every provider-side id `conv` names, whatever its dialect (each shape is one provider's)."""
    yield from _top_level(conv.params)
    for segment in conv.segments:
        audio = segment.native.get("audio") if segment.role == "assistant" and isinstance(segment.native, dict) else None
        if isinstance(audio, dict) and isinstance(audio.get("id"), str):
            yield Named(AUDIO, audio["id"], "messages.audio.id")
        for block in segment.blocks:
            if block.kind not in _UNNAMING:
                # Kept with the block's content: an agent's resent turns are walked once, not on every request.
                facts = block.facts()
                named = facts.get(_NAMED)
                if named is None:
                    named = facts[_NAMED] = tuple(_walk(block.native))
                yield from named


def _top_level(params: dict) -> Iterator[Named]:
    conversation = params.get("conversation")        # Responses: an id, or {"id": ...}
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if isinstance(conversation, str):
        yield Named(CONVERSATION, conversation, "conversation")
    container = params.get("container")              # Messages: an id, or {"id": ..., "skills": [...]}
    if isinstance(container, str):
        yield Named(CONTAINER, container, "container")
    elif isinstance(container, dict):
        if isinstance(container.get("id"), str):
            yield Named(CONTAINER, container["id"], "container.id")
        for skill in _list(container.get("skills")):
            if isinstance(skill, dict) and skill.get("type") == "custom" and isinstance(skill.get("skill_id"), str):
                yield Named(SKILL, skill["skill_id"], "container.skills")
    output = field(params, "outputConfig")         # Vertex: generated media written there by the project's agent
    prefix = field(output, "outputUriPrefix") if isinstance(output, dict) else None
    if isinstance(prefix, str):
        yield Named(STORAGE, prefix, "outputConfig.outputUriPrefix")
    prompt = params.get("prompt")                    # Responses: a stored prompt's variables may be files
    if isinstance(prompt, dict) and isinstance(prompt.get("variables"), dict):
        for value in prompt["variables"].values():
            yield from _walk(value)


def _walk(node: Any) -> Iterator[Named]:
    """Every id named in `node`, at any depth (with a stack of its own: a body as deep as the JSON parser takes
    would overflow Python's)."""
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(reversed(item))
        elif isinstance(item, dict):
            yield from _shape(item)
            pending.extend(reversed([v for k, v in item.items() if k not in _FREE_FORM and isinstance(v, (dict, list))]))


def _shape(node: dict) -> Iterator[Named]:
    """The ids one JSON object names in its provider's documented input shape (an output a client sends back,
    such as a code execution result's `file_id`, names nothing: the model does not read the file again)."""
    kind = node.get("type")
    if kind == "item_reference" and isinstance(node.get("id"), str):
        yield Named(ITEM, node["id"], "input")
    elif kind in ("input_file", "input_image", "computer_screenshot", "container_upload", "file") \
            and isinstance(node.get("file_id"), str):
        yield Named(FILE, node["file_id"], "file_id")     # Responses parts, Anthropic's upload and file source
    elif kind == "file" and isinstance(node.get("file"), dict) and isinstance(node["file"].get("file_id"), str):
        yield Named(FILE, node["file"]["file_id"], "file.file_id")     # a Chat Completions file part
    elif kind == "file_search":
        for ident in _strings(node.get("vector_store_ids")):
            yield Named(VECTOR_STORE, ident, "tools.vector_store_ids")
    elif kind == "code_interpreter":
        container = node.get("container")            # an id, or {"type": "auto", "file_ids": [...]}
        if isinstance(container, str):
            yield Named(CONTAINER, container, "tools.container")
        elif isinstance(container, dict):
            for ident in _strings(container.get("file_ids")):
                yield Named(FILE, ident, "tools.container.file_ids")
    elif kind == "container_reference" and isinstance(node.get("container_id"), str):     # a shell tool's environment
        yield Named(CONTAINER, node["container_id"], "tools.environment.container_id")
    elif kind == "container_auto":
        for ident in _strings(node.get("file_ids")):
            yield Named(FILE, ident, "tools.environment.file_ids")
    elif kind == "skill_reference" and isinstance(node.get("skill_id"), str):
        yield Named(SKILL, node["skill_id"], "skill_id")
    elif kind == "image_generation" and isinstance(node.get("input_image_mask"), dict):
        mask = node["input_image_mask"].get("file_id")
        if isinstance(mask, str):
            yield Named(FILE, mask, "tools.input_image_mask.file_id")
    elif kind in _MEDIA and isinstance(node.get("uri"), str) and _names_stored_file(node["uri"]):
        yield Named(STORAGE if node["uri"].startswith("gs://") else FILE, node["uri"], "uri")
    for ident in _strings(field(node, "fileSearchStoreNames")):
        yield Named(SEARCH_STORE, ident, "file_search_store_names")     # Gemini's and Interactions' File Search
    data = field(node, "fileData")     # a Gemini part
    if isinstance(data, dict):
        uri = field(data, "fileUri")
        if isinstance(uri, str) and _names_stored_file(uri):
            yield Named(STORAGE if uri.startswith("gs://") else FILE, uri, "fileData.fileUri")
    s3 = node.get("s3Location")                      # Bedrock Converse: read with the gateway's own role
    if isinstance(s3, dict) and isinstance(s3.get("uri"), str):
        yield Named(STORAGE, s3["uri"], "s3Location.uri")
    yield from _grounding(node)


def _grounding(node: dict) -> Iterator[Named]:
    """What one object of Vertex's grounding names in the gateway's project (each found at its own depth by `_walk`):
    a RAG resource's corpus, a Vertex AI Search data store or engine, an external API's key secret or service account."""
    if _GROUNDING.isdisjoint(node):     # every object of every body comes here: most name none of these
        return
    corpus = field(node, "ragCorpus")
    for ident in [corpus] if isinstance(corpus, str) else _strings(field(node, "ragCorpora")):
        yield Named(RAG_CORPUS, ident, "retrieval.vertexRagStore")
    search = field(node, "vertexAiSearch")
    for ident in (search.get("datastore"), search.get("engine")) if isinstance(search, dict) else ():
        if isinstance(ident, str):
            yield Named(DATA_STORE, ident, "retrieval.vertexAiSearch")
    store = field(node, "dataStore")     # a data store spec's
    if isinstance(store, str):
        yield Named(DATA_STORE, store, "retrieval.vertexAiSearch.dataStoreSpecs")
    secret = field(node, "apiKeySecret")
    if isinstance(secret, str):
        yield Named(SECRET, secret, "retrieval.externalApi.apiKeySecret")
    account = field(node, "googleServiceAccountConfig")
    acting = field(account, "serviceAccount") if isinstance(account, dict) else None
    if isinstance(acting, str):
        yield Named(SERVICE_ACCOUNT, acting, "retrieval.externalApi.authConfig")


_GROUNDING = frozenset(f for name in ("ragCorpus", "ragCorpora", "vertexAiSearch", "dataStore", "apiKeySecret",
                                      "googleServiceAccountConfig") for f in (name, snake(name)))


def _strings(value: Any) -> list[str]:
    return [v for v in _list(value) if isinstance(v, str)]


def _list(value: Any) -> list:
    """`value` if it is a list, else none: a body's shapes are the caller's (or an upstream's) to get wrong."""
    return value if isinstance(value, list) else []


def _names_stored_file(uri: str) -> bool:
    """A Gemini Files API name (`files/x`, or its URL) or a Cloud Storage object: what the gateway's account
    reads. A public https URL or a YouTube link is anyone's."""
    return uri.startswith(("files/", "gs://")) or (
        uri.startswith("https://generativelanguage.googleapis.com/") and "/files/" in uri)


def body_ids(body: dict) -> Iterator[Named]:
    """Every provider-side id a raw request body names in its parts (a Gemini `countTokens` body)."""
    return _walk(body)


async def check_owned(owners: StoredIds, owner: str, named: Iterable[Named], granted: Collection[str] = ()) -> None:
    """A 404 for the first of `named` that `owner` (a keyed caller's principal) did not create here and its key
    is not `granted` (the key's `provider_ids`: objects the operator made for it outside the gateway)."""
    for found in named:
        if found.ident not in granted and not await owners.allows(found.kind, found.ident, owner):
            raise RequestError(f"{_NOUNS[found.kind]} with id '{found.ident}' not found.", field=found.field,
                               status=404, kind="not_found")


def created_ids(body: dict) -> Iterator[tuple[str, str]]:
    """(kind, id) of what an answer (a whole body or one streamed event) created and may be named again:
    Anthropic's `container` and the files its code execution wrote (read back through `/v1/files`), a Chat
    Completions audio answer, a stored response's output items and its code interpreter's containers."""
    if not isinstance(body, dict):      # an upstream's answer is whatever JSON it sent
        return
    kind = body.get("type")
    if kind in ("message", "message_start", "message_delta"):
        holder = body.get("message") if kind == "message_start" else body.get("delta") if kind == "message_delta" else body
        container = holder.get("container") if isinstance(holder, dict) else None
        if isinstance(container, dict) and isinstance(container.get("id"), str):
            yield CONTAINER, container["id"]
        for block in _list(holder.get("content")) if isinstance(holder, dict) else ():
            yield from _written_files(block)
        return
    if kind == "content_block_start":
        yield from _written_files(body.get("content_block"))
        return
    if body.get("object") in ("chat.completion", "chat.completion.chunk"):
        for choice in _list(body.get("choices")):
            message = choice.get("message", choice.get("delta")) if isinstance(choice, dict) else None
            audio = message.get("audio") if isinstance(message, dict) else None
            if isinstance(audio, dict) and isinstance(audio.get("id"), str):
                yield AUDIO, audio["id"]
        return
    response = body.get("response") if isinstance(body.get("response"), dict) else body
    if response.get("object") != "response":
        return
    stored = response.get("store") is not False      # items of an unstored response cannot be referenced
    for item in _list(response.get("output")):
        if not isinstance(item, dict):
            continue
        if stored and isinstance(item.get("id"), str):
            yield ITEM, item["id"]
        environment = item.get("environment")      # a hosted shell call's container
        for holder in (item, environment if isinstance(environment, dict) else {}):
            if isinstance(holder.get("container_id"), str):
                yield CONTAINER, holder["container_id"]


def _written_files(block: object) -> Iterator[tuple[str, str]]:
    """The files a code execution result block names (`bash_code_execution_output`, `code_execution_output`)."""
    if not isinstance(block, dict) or not str(block.get("type", "")).endswith("code_execution_tool_result"):
        return
    result = block.get("content")
    for output in _list(result.get("content")) if isinstance(result, dict) else ():
        if isinstance(output, dict) and isinstance(output.get("file_id"), str):
            yield FILE, output["file_id"]


def record_listed(owners: StoredIds, owner: str | None, page: bytes) -> None:
    """An `input_items` page of `owner`'s stored response: its items' ids, which `item_reference` may name, are
    `owner`'s too (the provider gave ids to the inputs the caller sent without one)."""
    try:
        items = json.loads(page).get("data")
    except (ValueError, AttributeError):
        return
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            owners.record(ITEM, item["id"], owner)
