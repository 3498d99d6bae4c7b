"""What a client finds before its first model request, in zero config: each SDK's `models.list()` in its own
shape, base URLs without `/v1` served, a 404 that names the base-URL mistake, every refusal logged, error texts
not mangled by scrubbing a placeholder key, and cache writes in the per-request log line."""

from __future__ import annotations

import json
import logging

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types as gtypes
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from prefixgate.gateway.logs import JsonFormatter, log_request
from prefixgate.gateway.paths import aliased
from prefixgate.gateway.upstream import implausible_keys, scrub
from prefixgate.ledger import LedgerRecord
from prefixgate.policies import builtin_upstreams
from tests.gateway.support_gateway import running_gateway, running_upstream, settings_for
from tests.support_services import ServerThread


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        mp.delenv(var, raising=False)         # zero config: the callers' keys go through
    try:
        with running_upstream() as up, running_gateway(settings_for(up.url, tmp_path_factory.mktemp("gw"))) as gw:
            yield up, gw.url
    finally:
        mp.undo()


def test_openai_sdk_lists_and_retrieves_models_in_openai_shape(gateway):
    _, url = gateway
    client = openai.OpenAI(base_url=url + "/v1", api_key="caller-key")
    models = {m.id: m for m in client.models.list()}
    # GPT ids from providers.toml that zero config's `gpt-*` route serves, and Claude's and Gemini's.
    assert {"gpt-5.4", "gpt-5.4-mini", "claude-sonnet-5-5", "gemini-3.5-flash"} <= set(models)
    assert models["gpt-5.4"].object == "model" and models["gpt-5.4"].owned_by == "openai"
    assert client.models.retrieve("gpt-5.4").id == "gpt-5.4"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")


def test_anthropic_sdk_gets_anthropics_shape(gateway):
    _, url = gateway
    client = anthropic.Anthropic(base_url=url, api_key="caller-key")
    models = {m.id: m for m in client.models.list()}
    assert "claude-sonnet-5-5" in models and models["claude-sonnet-5-5"].type == "model"
    assert models["claude-sonnet-5-5"].created_at.year >= 2025       # the catalogue's release date
    raw = httpx.get(url + "/v1/models", headers={"anthropic-version": "2023-06-01", "x-api-key": "k"}).json()
    assert raw["has_more"] is False and "object" not in raw
    assert client.models.retrieve("claude-sonnet-5-5").id == "claude-sonnet-5-5"


def test_google_genai_lists_models_under_v1beta(gateway):
    _, url = gateway
    client = genai.Client(api_key="caller-key", http_options=gtypes.HttpOptions(base_url=url))
    names = {m.name for m in client.models.list()}
    assert {"models/gemini-3.5-flash", "models/gpt-5.4"} <= names
    # The path alone says Gemini (a REST caller may send its key in the query, or none in zero config).
    raw = httpx.get(url + "/v1beta/models").json()
    assert "object" not in raw and raw["models"][0]["name"].startswith("models/")
    one = client.models.get(model="gemini-3.5-flash")
    assert one.name == "models/gemini-3.5-flash" and "generateContent" in one.supported_actions


def test_base_urls_without_v1_reach_the_v1_endpoints(gateway):
    up, url = gateway
    # DSPy on Anthropic and some plugins append /messages (or /chat/completions) to a bare base URL.
    reply = anthropic.Anthropic(base_url=url + "/", api_key="k").messages.create(
        model="claude-sonnet-5-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    assert reply.content[0].text == "Hello, world"
    chat = openai.OpenAI(base_url=url, api_key="k").chat.completions.create(
        model="gpt-5.4", messages=[{"role": "user", "content": "hi"}])
    assert chat.choices[0].message.content == "Hello, world"
    assert [r.path for r in up.received[-2:]] == ["/v1/messages", "/v1/chat/completions"]


def test_file_paths_without_v1_are_their_v1_twins():
    # openai's files.create and uploads.upload_file_chunked append /files and /uploads to the base URL.
    assert [aliased(p) for p in ("/files", "/uploads", "/uploads/upload_1/parts", "/uploadsx")] == \
        ["/v1/files", "/v1/uploads", "/v1/uploads/upload_1/parts", "/uploadsx"]


def test_a_404_names_the_base_url_mistake_and_every_refusal_is_logged(gateway):
    _, url = gateway
    lines: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = lines.append
    logger = logging.getLogger("prefixgate.gateway")
    logger.addHandler(handler)
    try:
        with pytest.raises(openai.NotFoundError) as exc:
            openai.OpenAI(base_url=url + "/v1/v1", api_key="k").chat.completions.create(
                model="gpt-5.4", messages=[{"role": "user", "content": "hi"}])
        httpx.post(url + "/v1/chat/completions", content=b"{not json", headers={"user-agent": "probe/1"})
    finally:
        logger.removeHandler(handler)
    assert "drop '/v1'" in exc.value.message and "/v1/chat/completions" in exc.value.message
    logged = [r.fields for r in lines if hasattr(r, "fields")]
    assert {(f["method"], f["path"], f["status"]) for f in logged} >= {("POST", "/v1/v1/chat/completions", 404),
                                                                       ("POST", "/v1/chat/completions", 400)}
    assert any(f["user_agent"] == "probe/1" and f["client"].startswith("127.0.0.1:") for f in logged)


def test_scrubbing_replaces_plausible_secrets_only(monkeypatch, tmp_path):
    # The docs' own example key `k` left "is not a ***nown openai model" before.
    assert scrub("model 'x' is not a known openai model", "k") == "model 'x' is not a known openai model"
    assert scrub("Incorrect API key provided: my-long-key-123", "my-long-key-123") == "Incorrect API key provided: ***"
    assert scrub("Incorrect API key provided: sk-abcdef123456") == "Incorrect API key provided: ***"
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-a-real-looking-key-0001")
    warnings = implausible_keys(builtin_upstreams(settings_for("http://127.0.0.1:9", tmp_path)).values())
    assert len(warnings) == 1 and warnings[0].startswith("OPENAI_API_KEY holds a 1-character key")


def test_the_request_log_line_has_cache_writes_by_ttl():
    rec = LedgerRecord(id="r1", ts=0.0, route="anthropic", target="anthropic", model="claude-sonnet-5-5",
                       uncached_input=12, cache_writes={"5m": 3000, "1h": 500}, output=7)
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append
    logger = logging.getLogger("prefixgate.requests")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        log_request(rec)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    line = json.loads(JsonFormatter().format(seen[0]))
    assert line["cache_writes"] == {"5m": 3000, "1h": 500} and line["uncached_input"] == 12


def test_a_self_hosted_backend_lists_its_own_models(tmp_path, monkeypatch):
    # Zero config with `backend_url`: every other name goes to that OpenAI-compatible server (vLLM, SGLang,
    # `prefixgate backend`), which has no catalogue rows, so the gateway asks it.
    async def models(request):
        return JSONResponse({"object": "list", "data": [{"id": "llama-3-8b", "object": "model"},
                                                        {"id": "qwen-2-7b", "object": "model"}]})
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with ServerThread(Starlette(routes=[Route("/v1/models", models)])) as backend:
        settings = settings_for("http://127.0.0.1:9", tmp_path, backend_url=backend.url)
        with running_gateway(settings) as gw:
            names = [m.id for m in openai.OpenAI(base_url=gw.url + "/v1", api_key="k").models.list()]
    assert {"llama-3-8b", "qwen-2-7b", "gpt-5.4"} <= set(names)
    # A backend that does not answer leaves the rest of the list intact.
    settings = settings_for("http://127.0.0.1:9", tmp_path, backend_url="http://127.0.0.1:9")
    with running_gateway(settings) as gw:
        names = [m.id for m in openai.OpenAI(base_url=gw.url + "/v1", api_key="k").models.list()]
    assert "gpt-5.4" in names and "llama-3-8b" not in names
