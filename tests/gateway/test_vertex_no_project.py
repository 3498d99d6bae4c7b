"""A Vertex upstream whose Google Cloud project the gateway cannot know. Where that is knowable at start-up (a
policy routing to the built-in `vertex` upstream with no project anywhere) the policy does not load; where it is
only met per request (zero config, a Vertex client calling a gateway not set up for Vertex) the caller gets one
error no SDK retries: 501 (Google's UNIMPLEMENTED, outside google-genai's retried statuses) with
`x-should-retry: false` (read by the anthropic and openai SDKs, which retry every 5xx otherwise). Real clients;
the gateway counts the requests it received. A service-account key file names its project: that one is used,
as google-auth's `default()` returns it."""

from __future__ import annotations

import anthropic
import google.auth
import httpx
import pytest
import uvicorn
from anthropic import AnthropicVertex
from click.testing import CliRunner
from google import genai
from google.genai import errors, types
from google.oauth2.credentials import Credentials

from prefixgate.cli import main
from prefixgate.config import Settings
from prefixgate.dialects.vertex import resource_root as vertex_root
from prefixgate.gateway.app import create_app
from prefixgate.policies import PolicyError, load_policy
from prefixgate.policies.load import builtin_upstreams
from tests.gateway.support_gateway import Counted, settings_for
from tests.gateway.support_vertex import (
    CLAUDE,
    GEMINI,
    LOCATION,
    PROJECT,
    gateway_over_mock_vertex,
    service_account_file,
)
from tests.support_services import ServerThread

# What every SDK retries by default: google-genai's HttpRetryOptions codes (408, 429, 500, 502, 503, 504:
# google/genai/_api_client.py), the anthropic and openai SDKs' 408, 409, 429 and >= 500 unless x-should-retry.
GENAI_RETRIED = {408, 429, 500, 502, 503, 504}
NOWHERE = "http://127.0.0.1:9"     # every provider's URL: nothing may leave the gateway here


@pytest.fixture
def no_project(monkeypatch):
    for name in ("GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_APPLICATION_CREDENTIALS",
                 "PREFIXGATE_VERTEX_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFIXGATE_VERTEX_ACCESS_TOKEN", "mock-vertex-token")


def test_a_claude_vertex_client_is_answered_once_with_what_to_set(tmp_path, no_project):
    gateway = Counted(create_app(settings_for(NOWHERE, tmp_path, vertex_base_url=NOWHERE)))
    ask = {"model": CLAUDE, "messages": [{"role": "user", "content": "Hi"}]}
    with ServerThread(gateway) as gw:
        client = AnthropicVertex(base_url=f"{gw.url}/v1", region=LOCATION, project_id="caller-project",
                                 access_token="gateway-key")          # max_retries: the SDK's default, 2
        calls = {"create": lambda: client.messages.create(max_tokens=16, **ask),
                 "stream": lambda: client.messages.stream(max_tokens=16, **ask).__enter__().get_final_message(),
                 "count_tokens": lambda: client.messages.count_tokens(**ask)}
        for name, call in calls.items():
            before = len(gateway.paths)
            with pytest.raises(anthropic.APIStatusError) as refused:
                call()
            assert len(gateway.paths) - before == 1, name
            response = refused.value.response
            assert response.status_code == 501 and response.headers["x-should-retry"] == "false", name
            assert refused.value.body["error"]["type"] == "api_error", name
            assert "set GOOGLE_CLOUD_PROJECT" in refused.value.message, name


def test_a_gemini_vertex_client_retrying_server_errors_is_answered_once(tmp_path, no_project):
    gateway = Counted(create_app(settings_for(NOWHERE, tmp_path, vertex_base_url=NOWHERE)))
    with ServerThread(gateway) as gw:
        retry = types.HttpRetryOptions(attempts=4, initial_delay=0.01, max_delay=0.02)
        client = genai.Client(vertexai=True, project="caller-project", location=LOCATION,
                              credentials=Credentials("gateway-key"),
                              http_options=types.HttpOptions(base_url=gw.url, retry_options=retry))
        calls = {"generate": lambda: client.models.generate_content(model=GEMINI, contents="Hi"),
                 "stream": lambda: list(client.models.generate_content_stream(model=GEMINI, contents="Hi")),
                 "count_tokens": lambda: client.models.count_tokens(model=GEMINI, contents="Hi"),
                 "caches.list": lambda: list(client.caches.list())}
        for name, call in calls.items():
            before = len(gateway.paths)
            with pytest.raises(errors.APIError) as refused:
                call()
            assert len(gateway.paths) - before == 1, name
            assert refused.value.code == 501 and refused.value.code not in GENAI_RETRIED, name
            assert refused.value.status == "UNIMPLEMENTED" and "set GOOGLE_CLOUD_PROJECT" in refused.value.message


def test_serve_with_a_policy_routing_to_the_builtin_vertex_without_a_project_does_not_start(tmp_path, no_project,
                                                                                             monkeypatch):
    policy = tmp_path / "policy.yaml"
    policy.write_text("routes:\n  - name: claude\n    models: [claude-*]\n"
                      "    targets: [{upstream: anthropic}, {upstream: vertex}]\n")
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: pytest.fail("the gateway started"))
    env = {"PREFIXGATE_POLICY_FILE": str(policy), "PREFIXGATE_LEDGER_PATH": str(tmp_path / "ledger.sqlite"),
           "PREFIXGATE_CONFIG": ""}
    result = CliRunner().invoke(main, ["serve"], env=env)
    assert result.exit_code == 2
    said = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(said) == 1 and "routes.0.targets.1: upstream 'vertex' has no Google Cloud project" in said[0]
    with pytest.raises(PolicyError, match="set GOOGLE_CLOUD_PROJECT"):
        load_policy(Settings(policy_file=str(policy)))


def test_a_policy_not_routing_to_vertex_loads_without_a_project(tmp_path, no_project):
    policy = tmp_path / "policy.yaml"
    policy.write_text("routes:\n  - name: claude\n    models: [claude-*]\n    targets: [{upstream: anthropic}]\n")
    assert load_policy(Settings(policy_file=str(policy))).routes[0].name == "claude"


def test_the_project_of_the_service_account_key_is_the_gateways(tmp_path, no_project, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(service_account_file(tmp_path, "http://127.0.0.1:9")))
    up = builtin_upstreams(Settings(vertex_base_url="http://vertex:1"))["vertex"]
    assert up.url == f"http://vertex:1/v1/projects/{PROJECT}/locations/global"
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")       # the variable wins, as in google-auth
    up = builtin_upstreams(Settings(vertex_base_url="http://vertex:1"))["vertex"]
    assert up.url == "http://vertex:1/v1/projects/env-project/locations/global"


def test_an_unreadable_credentials_file_leaves_the_project_unknown(tmp_path, no_project, monkeypatch):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with ServerThread(create_app(settings_for(NOWHERE, tmp_path, vertex_base_url=NOWHERE))) as gw:
        answer = httpx.post(f"{gw.url}/v1beta1/projects/p/locations/{LOCATION}/publishers/google/models/"
                            f"{GEMINI}:generateContent", json={"contents": [{"parts": [{"text": "Hi"}]}]})
    assert answer.status_code == 501 and answer.json()["error"]["status"] == "UNIMPLEMENTED"


def test_with_a_project_claudes_token_count_is_counted_by_vertex(tmp_path, monkeypatch):
    def policy(mock: str) -> dict:
        return {"upstreams": {"v": {"kind": "vertex", "project": PROJECT, "location": LOCATION, "url": mock}},
                "routes": [{"name": "claude", "models": ["*"], "targets": [{"upstream": "v"}]}]}

    with gateway_over_mock_vertex(monkeypatch, tmp_path, policy) as gw:
        client = AnthropicVertex(base_url=f"{gw}/v1", region=LOCATION, project_id="caller-project",
                                 access_token="gateway-key", max_retries=0)
        counted = client.messages.count_tokens(model=CLAUDE, messages=[{"role": "user", "content": "Hi there"}])
    assert counted.input_tokens > 0


def test_the_gateways_project_is_the_one_google_auth_finds(tmp_path, no_project, monkeypatch):
    # google.auth.default() is the oracle: GOOGLE_CLOUD_PROJECT, else the legacy GCLOUD_PROJECT, else the
    # service-account key's project_id; an authorized-user file names none. Neither call goes to the network here.
    user = tmp_path / "user.json"
    user.write_text('{"type": "authorized_user", "client_id": "a", "client_secret": "b", "refresh_token": "c", '
                    '"quota_project_id": "billed-project"}')
    key = service_account_file(tmp_path, "http://127.0.0.1:9")
    for credentials, env in ((key, {}), (key, {"GCLOUD_PROJECT": "legacy-project"}), (user, {}),
                             (user, {"GCLOUD_PROJECT": "legacy-project"}),
                             (key, {"GCLOUD_PROJECT": "legacy-project", "GOOGLE_CLOUD_PROJECT": "env-project"})):
        with monkeypatch.context() as m:
            m.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(credentials))
            for name, value in env.items():
                m.setenv(name, value)
            found = google.auth.default()[1] or ""
            up = builtin_upstreams(Settings(vertex_base_url="http://vertex:1"))["vertex"]
            assert up.url == vertex_root("http://vertex:1", found, "global"), (credentials.name, env)
