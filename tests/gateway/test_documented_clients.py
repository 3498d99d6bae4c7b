"""The client snippets the README and docs/providers.md give, run as written from a process with no provider key
in its environment: the README's against a gateway over the mock providers, providers.md's against the mock.
Written without an API key, the openai and google-genai clients raised at construction and the Anthropic one at
its first request."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import anthropic
import boto3
import openai
import pytest
from google import genai
from google.oauth2.credentials import Credentials

from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import gateway_over_mock
from tests.support_services import ServerThread

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AZURE_OPENAI_API_KEY")
ASK = [{"role": "user", "content": "Where is my parcel?"}]


def snippet_clients(page: str, after: str, fill: dict[str, str], **names: object) -> list:
    """Each client the first Python block after `after` in `page` builds, with the texts in `fill` replaced (the
    documented URL by the server's, a placeholder by a value); `names` are what the block uses unimported."""
    text = (ROOT / page).read_text(encoding="utf-8").split(after, 1)[1]
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    for written, value in fill.items():
        assert written in code, written
        code = code.replace(written, value)
    namespace: dict = dict(names)
    clients = []
    for statement in ast.parse(code).body:
        if isinstance(statement, ast.Expr):
            clients.append(eval(compile(ast.Expression(statement.value), page, "eval"), namespace))
        else:
            exec(compile(ast.Module([statement], []), page, "exec"), namespace)
    return clients


@pytest.fixture
def no_provider_keys(monkeypatch):
    for var in PROVIDER_KEYS:
        monkeypatch.delenv(var, raising=False)


def test_the_readme_clients_reach_the_gateway(tmp_path, no_provider_keys):
    with gateway_over_mock(tmp_path) as gw:
        # The gateway holds no key here, so each client's is forwarded to the mock, which takes any.
        openai_client, anthropic_client, genai_client = snippet_clients(
            "README.md", "## Gateway", {"http://127.0.0.1:8080": gw.url, "api_key=...": "api_key='sk-readme-0001'"})
        chat = openai_client.chat.completions.with_raw_response.create(model="gpt-5.4-mini", messages=ASK)
        message = anthropic_client.messages.with_raw_response.create(model="claude-sonnet-5-5", max_tokens=64,
                                                                     messages=ASK)
        answer = genai_client.models.generate_content(model="gemini-3.5-flash", contents="Where is my parcel?")
    assert chat.headers["x-prefixgate-route"] == "openai" and chat.parse().choices[0].message.content
    assert message.headers["x-prefixgate-route"] == "anthropic" and message.parse().content[0].text
    assert answer.text and answer.usage_metadata.prompt_token_count > 0


def test_the_mock_providers_clients_reach_the_mock(no_provider_keys, monkeypatch):
    # The mock checks SigV4 against the AWS keys of its own environment, which the AWS clients sign with here.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAMOCKDOCS0001")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "mock-docs-secret-0001")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with ServerThread(mock_app(MockContext())) as mock:
        clients = snippet_clients("docs/providers.md", "The real SDKs work against it unchanged",
                                  {"http://127.0.0.1:8200": mock.url}, anthropic=anthropic, openai=openai, genai=genai,
                                  boto3=boto3, Credentials=Credentials)
        claude, gpt, gemini, bedrock, claude_bedrock, claude_vertex, gemini_vertex, deepseek, azure = clients
        assert claude.messages.create(model="claude-sonnet-5-5", max_tokens=64, messages=ASK).content[0].text
        assert gpt.chat.completions.create(model="gpt-5.4-mini", messages=ASK).choices[0].message.content
        assert gemini.models.generate_content(model="gemini-3.5-flash", contents="Where?").text
        converse = bedrock.converse(modelId="us.anthropic.claude-sonnet-5-5",
                                    messages=[{"role": "user", "content": [{"text": "Where is my parcel?"}]}])
        assert converse["output"]["message"]["content"][0]["text"]
        assert claude_bedrock.messages.create(model="us.anthropic.claude-sonnet-5-5", max_tokens=64,
                                              messages=ASK).content[0].text
        assert claude_vertex.messages.create(model="claude-sonnet-5-5", max_tokens=64, messages=ASK).content[0].text
        assert gemini_vertex.models.generate_content(model="gemini-3.5-flash", contents="Where?").text
        assert deepseek.chat.completions.create(model="deepseek-chat", messages=ASK).choices[0].message.content
        assert azure.chat.completions.create(model="gpt-5.4-mini", messages=ASK).choices[0].message.content
