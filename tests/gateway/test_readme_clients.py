"""The README's gateway snippet, run as written against a gateway over the mock providers, from a process with
no provider key in its environment (the gateway is where keys live). Written without `api_key`, the openai and
google-genai clients raised at construction and the Anthropic one at its first request."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.gateway.support_gateway import gateway_over_mock

README = Path(__file__).resolve().parents[2] / "README.md"
README_URL = "http://127.0.0.1:8080"


def readme_clients(gateway_url: str, api_key: str) -> list:
    """Each client the README's Gateway snippet builds, its base URL on `gateway_url` and `api_key=...` filled in."""
    section = README.read_text(encoding="utf-8").split("## Gateway", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1).replace(README_URL, gateway_url)
    code = code.replace("api_key=...", f"api_key={api_key!r}")
    namespace: dict = {}
    clients = []
    for statement in ast.parse(code).body:
        if isinstance(statement, ast.Expr):
            clients.append(eval(compile(ast.Expression(statement.value), "README.md", "eval"), namespace))
        else:
            exec(compile(ast.Module([statement], []), "README.md", "exec"), namespace)
    return clients


def test_the_readme_clients_reach_the_gateway_from_a_process_without_provider_keys(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with gateway_over_mock(tmp_path) as gw:
        # The gateway holds no key here, so each placeholder is forwarded to the mock, which takes any key.
        openai_client, anthropic_client, genai_client = readme_clients(gw.url, "sk-readme-placeholder-0001")
        chat = openai_client.chat.completions.with_raw_response.create(
            model="gpt-5.4-mini", messages=[{"role": "user", "content": "Where is my parcel?"}])
        message = anthropic_client.messages.with_raw_response.create(
            model="claude-sonnet-5-5", max_tokens=64, messages=[{"role": "user", "content": "Where is my parcel?"}])
        answer = genai_client.models.generate_content(model="gemini-3.5-flash", contents="Where is my parcel?")
    assert chat.headers["x-prefixgate-route"] == "openai" and chat.parse().choices[0].message.content
    assert message.headers["x-prefixgate-route"] == "anthropic" and message.parse().content[0].text
    assert answer.text and answer.usage_metadata.prompt_token_count > 0
