"""Files across two OpenAI accounts behind one gateway (real openai SDK, gateway and mock in-process; the mock
keeps each key's files apart, as OpenAI keeps each organisation's): a model request naming a file goes to the
account that holds it, a list reaches every account of the key's routes, and a file the operator made for a
key outside the gateway (`provider_ids`) is that key's to read through `/v1/files`."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager

import anthropic
import openai
import pytest
from google import genai

from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread

ACME, BETA, GRANTED = "pg-acme-pool-0123456", "pg-beta-pool-0123456", "pg-granted-012345678"
ACCOUNT_A, ACCOUNT_B = "sk-account-a-000000", "sk-account-b-000000"


@pytest.fixture
def mock(monkeypatch) -> Iterator[str]:
    """The mock, where upstreams openai-a and openai-b are two accounts (two keys)."""
    monkeypatch.setenv("OPENAI_KEY_A", ACCOUNT_A)
    monkeypatch.setenv("OPENAI_KEY_B", ACCOUNT_B)
    monkeypatch.setenv("CLAUDE_KEY_A", "sk-ant-account-a-0000")
    monkeypatch.setenv("CLAUDE_KEY_B", "sk-ant-account-b-0000")
    monkeypatch.setenv("GEMINI_KEY_A", "AIzaFilesAccountA000000000000000000000")
    monkeypatch.setenv("GEMINI_KEY_B", "AIzaFilesAccountB000000000000000000000")
    with ServerThread(mock_app(MockContext())) as server:
        yield server.url


@contextmanager
def gateway(tmp_path, mock: str, routes: list[dict], granted: tuple[str, ...] = (), keys: tuple[dict, ...] = ()
            ) -> Iterator[str]:
    settings = settings_for(mock, tmp_path)
    policy = policy_for(settings, {
        "upstreams": {"openai-a": {"kind": "openai", "url": mock + "/v1", "api_key_env": "OPENAI_KEY_A"},
                      "openai-b": {"kind": "openai", "url": mock + "/v1", "api_key_env": "OPENAI_KEY_B"},
                      "claude-a": {"kind": "anthropic", "url": mock, "api_key_env": "CLAUDE_KEY_A"},
                      "claude-b": {"kind": "anthropic", "url": mock, "api_key_env": "CLAUDE_KEY_B"},
                      "gemini-a": {"kind": "gemini", "url": mock, "api_key_env": "GEMINI_KEY_A"},
                      "gemini-b": {"kind": "gemini", "url": mock, "api_key_env": "GEMINI_KEY_B"}},
        "routes": routes,
        "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"},
                 {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"},
                 {"name": "granted", "key_sha256": hash_key(GRANTED), "tenant": "gamma",
                  "provider_ids": list(granted)}, *keys]})
    with running_gateway(settings, policy=policy) as gw:
        yield gw.url


def client(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


TEAMS = ("sales", "legal", "finance", "support", "research", "design", "security", "marketing")


def ask(url: str, key: str, file_id: str, n: int) -> str:
    # Each a new prefix (its own system prompt), so a pool places each afresh.
    return client(url, key).chat.completions.create(model="gpt-5.4", messages=[
        {"role": "system", "content": f"You summarise documents for the {TEAMS[n]} team."},
        {"role": "user", "content": [{"type": "file", "file": {"file_id": file_id}},
                                     {"type": "text", "text": "Summarise it."}]}]).choices[0].message.content


# A pool of two accounts as one target's replicas, and as a balanced route's two targets (round robin: every
# other new prefix goes to the other account).
POOLS = {"replicas": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"replicas": ["openai-a", "openai-b"]}]}],
         "balanced": [{"name": "gpt", "models": ["gpt-*"], "balance": "round_robin",
                       "targets": [{"upstream": "openai-a"}, {"upstream": "openai-b"}]}]}


@pytest.mark.parametrize("pool", sorted(POOLS))
def test_a_request_naming_a_file_goes_to_the_account_that_holds_it(tmp_path, mock, pool):
    with gateway(tmp_path, mock, POOLS[pool]) as gw:
        made = client(gw, ACME).files.create(file=("plan.txt", b"the plan: ship in May"), purpose="user_data")
        # Without the pin, about half of these went to the account without the file: OpenAI's 404.
        for n in range(8):
            assert ask(gw, ACME, made.id, n)


ONE_ACCOUNT = [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai-a"}]}]


def test_a_granted_file_is_the_keys_to_read_but_not_to_delete(tmp_path, mock):
    # The operator uploads a file to account A outside the gateway and grants it to one key.
    operator = client(mock, ACCOUNT_A)
    made = operator.files.create(file=("terms.txt", b"the terms"), purpose="user_data")
    with gateway(tmp_path, mock, ONE_ACCOUNT, granted=(made.id,)) as gw:
        assert ask(gw, GRANTED, made.id, 0)         # named in a request, as before
        assert client(gw, GRANTED).files.retrieve(made.id).filename == "terms.txt"
        assert client(gw, GRANTED).files.content(made.id).read() == b"the terms"
        with pytest.raises(openai.NotFoundError):     # read-only: the operator's file stays
            client(gw, GRANTED).files.delete(made.id)
        assert operator.files.retrieve(made.id).id == made.id
        with pytest.raises(openai.NotFoundError):     # another key, of another tenant
            client(gw, BETA).files.retrieve(made.id)


ACME_ON_B = "pg-acme-on-b-01234567"
SPLIT = [{"name": "a", "models": ["gpt-5.4", "claude-sonnet-5-5", "gemini-3.5-flash"],
          "targets": [{"upstream": "openai-a"}, {"upstream": "claude-a"}, {"upstream": "gemini-a"}]},
         {"name": "b", "models": ["gpt-5.4-mini", "claude-haiku-4-5", "gemini-3.8-flash"],
          "targets": [{"upstream": "openai-b"}, {"upstream": "claude-b"}, {"upstream": "gemini-b"}]}]
FILES_BETA = "files-api-2025-04-14"


def test_a_list_reaches_every_account_the_keys_routes_reach(tmp_path, mock):
    on_b = {"name": "acme-on-b", "key_sha256": hash_key(ACME_ON_B), "tenant": "acme", "routes": ["b"]}
    with gateway(tmp_path, mock, SPLIT, keys=(on_b,)) as gw:
        # acme's files in both accounts (a key reaching only B uploads there), beta's between them in A.
        mine = {client(gw, ACME).files.create(file=(f"a{i}.txt", b"a"), purpose="user_data").id for i in range(3)}
        others = {client(gw, BETA).files.create(file=(f"x{i}.txt", b"x"), purpose="user_data").id for i in range(2)}
        mine |= {client(gw, ACME_ON_B).files.create(file=(f"b{i}.txt", b"b"), purpose="user_data").id
                 for i in range(2)}
        assert {f.id for f in client(gw, ACME).files.list()} == mine
        assert {f.id for f in client(gw, ACME).files.list(limit=1)} == mine        # paged one by one
        assert {f.id for f in client(gw, BETA).files.list(limit=1)} == others
        # A key whose routes reach account B alone lists B's.
        assert len({f.id for f in client(gw, ACME_ON_B).files.list()}) == 2

        def claude(key: str) -> anthropic.Anthropic:
            return anthropic.Anthropic(base_url=gw, api_key=key, max_retries=0)

        mine = {claude(ACME).beta.files.upload(file=(f"a{i}.txt", b"a", "text/plain"), betas=[FILES_BETA]).id
                for i in range(3)}
        claude(BETA).beta.files.upload(file=("x.txt", b"x", "text/plain"), betas=[FILES_BETA])
        mine |= {claude(ACME_ON_B).beta.files.upload(file=(f"b{i}.txt", b"b", "text/plain"), betas=[FILES_BETA]).id
                 for i in range(2)}
        for limit in (20, 2):       # the SDK pages with the opaque `page` cursor
            assert {f.id for f in claude(ACME).beta.files.list(limit=limit, betas=[FILES_BETA])} == mine
        # Gemini's (two API keys: two projects), paged by `pageToken`. Clients held while used.
        acme, on_b = (genai.Client(api_key=key, http_options={"base_url": gw}) for key in (ACME, ACME_ON_B))
        mine = {acme.files.upload(file=io.BytesIO(b"a"), config={"mime_type": "text/plain"}).name for _ in range(3)}
        mine |= {on_b.files.upload(file=io.BytesIO(b"b"), config={"mime_type": "text/plain"}).name for _ in range(2)}
        for size in (20, 2):
            assert {f.name for f in acme.files.list(config={"page_size": size})} == mine


POOL = [{"name": "pool-gpt", "models": ["pool-gpt"],
         "targets": [{"upstream": "openai-a", "model": "gpt-5.4"}, {"upstream": "openai-b", "model": "gpt-5.4"}]},
        {"name": "pool-claude", "models": ["pool-claude"],
         "targets": [{"upstream": "claude-a", "model": "claude-haiku-4-5"},
                     {"upstream": "claude-b", "model": "claude-haiku-4-5"}]}]


def test_a_count_naming_a_file_asks_the_account_that_holds_it(tmp_path, mock):
    on_b = {"name": "acme-on-b", "key_sha256": hash_key(ACME_ON_B), "tenant": "acme", "routes": ["b"]}
    with gateway(tmp_path, mock, [*SPLIT, *POOL], keys=(on_b,)) as gw:
        report = b"Q3 report: revenue was 4417 units and churn fell to 2 percent.\n" * 20
        made = client(gw, ACME_ON_B).files.create(file=("q3.txt", report), purpose="user_data")
        # Counted on a route whose first target is account A: the file lives in B, so the count is asked there.
        asked = [{"role": "user", "content": [{"type": "input_file", "file_id": made.id},
                                              {"type": "input_text", "text": "Summarise it."}]}]
        assert client(gw, ACME).responses.input_tokens.count(model="pool-gpt", input=asked).input_tokens > 300
        claude = anthropic.Anthropic(base_url=gw, api_key=ACME, max_retries=0)
        held = anthropic.Anthropic(base_url=gw, api_key=ACME_ON_B, max_retries=0).beta.files.upload(
            file=("q3.txt", report, "text/plain"), betas=[FILES_BETA])
        counted = claude.beta.messages.count_tokens(model="pool-claude", betas=[FILES_BETA], messages=[
            {"role": "user", "content": [{"type": "document", "source": {"type": "file", "file_id": held.id}},
                                         {"type": "text", "text": "Summarise it."}]}])
        assert counted.input_tokens > 300
