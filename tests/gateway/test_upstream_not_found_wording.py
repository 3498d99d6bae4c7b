"""A provider's 404 for the caller's own object (gone at the provider: expired, deleted there) reaches the caller
as the provider words it, field by field the same body the gateway writes for an id the caller may not see
(another tenant's, or nobody's): no `upstream 'openai': ` before the message, which told the two apart. Which
upstream said it is the operator's, in the gateway's log (and the request's ledger `target`). Real openai SDK,
the gateway in front of the mock providers; the object is removed at the mock directly."""

from __future__ import annotations

import io
import logging
from contextlib import ExitStack

import httpx
import openai
import pytest
from google.genai import errors as genai_errors

from prefixgate.policies import hash_key
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.support_sdk_clients import gemini
from tests.support_services import ServerThread

ACME, BETA = "pg-acme-404s-0123456", "pg-beta-404s-0123456"
GATEWAY_KEY, GOOGLE_KEY = "sk-gateway-own-000000", "AIzaGatewayOwnKey000000000000000000"
GPT = "gpt-5.4"
POLICY = {"routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]},
                     {"name": "gemini", "models": ["gemini-*"], "targets": [{"upstream": "gemini"}]}],
          "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"},
                   {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"}]}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("not_found")
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", GATEWAY_KEY)
    mp.setenv("GEMINI_API_KEY", GOOGLE_KEY)
    with ExitStack() as stack:
        stack.callback(mp.undo)
        mock = stack.enter_context(ServerThread(mock_app(MockContext()))).url
        settings = settings_for(mock, folder)
        yield stack.enter_context(running_gateway(settings, policy=policy_for(settings, POLICY))).url, mock


def oai(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def not_found(call) -> dict:
    with pytest.raises(openai.NotFoundError) as refused:
        call()
    return refused.value.body


def removed_at_the_provider(mock: str, path: str) -> None:
    """`path` deleted at the mock with the gateway's own key (as an operator's script, or expiry, would)."""
    google = path.startswith("v1beta/")
    headers = {"x-goog-api-key": GOOGLE_KEY} if google else {"authorization": f"Bearer {GATEWAY_KEY}"}
    assert httpx.delete(f"{mock}/{path}", headers=headers).status_code == 200


def test_a_file_gone_at_the_provider_is_the_providers_404_as_another_tenants_id_is(stack, caplog):
    gw, mock = stack
    acme, beta = oai(gw, ACME), oai(gw, BETA)
    made = acme.files.create(file=("notes.txt", b"shipping notes"), purpose="user_data")
    removed_at_the_provider(mock, f"v1/files/{made.id}")
    with caplog.at_level(logging.INFO, logger="prefixgate.gateway"):
        own = not_found(lambda: acme.files.retrieve(made.id))        # forwarded: OpenAI's 404
    theirs = not_found(lambda: beta.files.retrieve(made.id))         # the gateway's own, never forwarded
    # OpenAI's 404 for a File its organisation does not hold.
    openai_404 = {"message": f"No such File object: {made.id}", "type": "invalid_request_error", "param": "id",
                  "code": None}
    assert own == theirs == openai_404
    assert any("upstream 'openai' answered 404" in r.getMessage() for r in caplog.records)


def test_a_stored_response_gone_at_the_provider_is_the_providers_404_as_another_tenants_id_is(stack):
    gw, mock = stack
    acme, beta = oai(gw, ACME), oai(gw, BETA)
    made = acme.responses.create(model=GPT, input="Say hi.", store=True)
    removed_at_the_provider(mock, f"v1/responses/{made.id}")
    own = not_found(lambda: acme.responses.retrieve(made.id))
    theirs = not_found(lambda: beta.responses.retrieve(made.id))
    # OpenAI's 404 for a response id it does not hold.
    openai_404 = {"message": f"Response with id '{made.id}' not found.", "type": "invalid_request_error",
                  "param": None, "code": None}
    assert own == theirs == openai_404
    # Continuing it: OpenAI's refusal of a previous_response_id it does not hold (a 400 naming the field, with
    # code previous_response_not_found, which clients such as Codex recover from by resending the whole input);
    # the gateway's refusal of the other tenant is the same, field by field.
    refused = []
    for client in (acme, beta):
        with pytest.raises(openai.BadRequestError) as chained:
            client.responses.create(model=GPT, input="Again.", previous_response_id=made.id)
        refused.append(chained.value.body)
    assert refused[0] == refused[1] == {"message": f"Previous response with id '{made.id}' not found.",
                                        "type": "invalid_request_error", "param": "previous_response_id",
                                        "code": "previous_response_not_found"}


def test_a_gemini_file_gone_at_the_provider_is_googles_refusal_as_another_tenants_is(stack):
    gw, mock = stack
    acme, beta = gemini(gw, ACME), gemini(gw, BETA)
    made = acme.files.upload(file=io.BytesIO(b"shipping notes"), config={"mime_type": "text/plain"})
    removed_at_the_provider(mock, f"v1beta/{made.name}")
    refusals = []
    for client in (acme, beta):
        with pytest.raises(genai_errors.ClientError) as refused:
            client.files.get(name=made.name)
        refusals.append(refused.value.details)
    # Google's answer for a File the project does not hold (or no longer): a 403 that does not say which.
    google_403 = {"error": {"code": 403, "status": "PERMISSION_DENIED", "message": "You do not have permission to "
                            f"access the File {made.name.removeprefix('files/')} or it may not exist."}}
    assert refusals[0] == refusals[1] == google_403
