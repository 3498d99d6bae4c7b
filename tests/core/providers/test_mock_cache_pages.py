"""mock-providers' `cachedContents.list`, a page at a time as Google's references describe it (the Gemini API's and
Vertex AI's alike): `pageSize` unset is a default under the maximum, above 1000 it is taken as 1000, and
`nextPageToken` is left out on the last page. Read with the real google-genai pager and over plain HTTP."""

from __future__ import annotations

import io
import uuid

import httpx
import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from prefixgate.simulation.mock.server import MockContext, tenant_of
from tests.core.providers.support_prompts import text_of

pytestmark = pytest.mark.slow
DOC = text_of(5000)     # over gemini-3.5-flash's minimum for a cache
LOCATION = "us-east5"


def made(ctx: MockContext, tenant: str, count: int) -> list[str]:
    """`count` caches in `tenant`'s workspace, their names in the order Google's list gives them (oldest first)."""
    body = {"model": "models/gemini-3.5-flash", "systemInstruction": {"parts": [{"text": DOC}]}}
    return [ctx.simulator.create_cached_content(body, now=ctx.clock(), tenant=tenant).name for _ in range(count)]


def test_the_gemini_list_pages_by_its_documented_size_and_token(mock_server):
    url, ctx = mock_server
    key = f"AIza-pages-{uuid.uuid4().hex}"
    names = made(ctx, tenant_of(key), 1003)

    def listed(**query: str) -> dict:
        answer = httpx.get(url + "/v1beta/cachedContents", params=query, headers={"x-goog-api-key": key})
        assert answer.status_code == 200, answer.text
        return answer.json()

    first = listed()        # no pageSize: "some default (under maximum)"
    assert 0 < len(first["cachedContents"]) < 1000 and first["nextPageToken"]
    most = listed(pageSize="5000")      # "values above 1000 will be coerced to 1000"
    assert [c["name"] for c in most["cachedContents"]] == names[:1000]
    last = listed(pageSize="5000", pageToken=most["nextPageToken"])
    assert [c["name"] for c in last["cachedContents"]] == names[1000:] and "nextPageToken" not in last
    for query in ({"pageSize": "-1"}, {"pageToken": "not-a-token"}):
        refused = httpx.get(url + "/v1beta/cachedContents", params=query, headers={"x-goog-api-key": key})
        assert refused.status_code == 400 and refused.json()["error"]["status"] == "INVALID_ARGUMENT"
    # google-genai's pager follows the tokens through every page.
    client = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=url, api_version="v1beta"))
    assert [c.name for c in client.caches.list(config={"page_size": 400})] == names


def test_the_vertex_list_pages_per_project_and_a_deletion_between_pages_skips_nothing(mock_server):
    url, ctx = mock_server
    project = f"proj-{uuid.uuid4().hex[:8]}"
    scope = f"projects/{project}/locations/{LOCATION}"
    names = [f"{scope}/{name}" for name in made(ctx, tenant_of(f"vertex:{scope}"), 7)]
    client = genai.Client(vertexai=True, project=project, location=LOCATION, credentials=Credentials("mock-vertex-token"),
                          http_options=types.HttpOptions(base_url=url))
    pager = client.caches.list(config={"page_size": 3})
    assert [c.name for c in pager.page] == names[:3]
    client.caches.delete(name=names[2])     # the last one the first page gave
    pager.next_page()
    assert [c.name for c in pager.page] == names[3:6]
    pager.next_page()
    assert [c.name for c in pager.page] == names[6:]
    with pytest.raises(IndexError):     # no nextPageToken on the last page: the pager has no more
        pager.next_page()
    # Another project's list holds none of them.
    other = genai.Client(vertexai=True, project=project + "x", location=LOCATION,
                         credentials=Credentials("mock-vertex-token"), http_options=types.HttpOptions(base_url=url))
    assert list(other.caches.list()) == []


def test_the_gemini_file_list_pages_by_its_documented_size_and_a_deletion_between_pages_skips_nothing(mock_server):
    # files.list: "pageSize: Maximum number of Files to return per page. If unspecified, defaults to 10. Maximum
    # pageSize is 100." The token continues after the last file's place, not after the file itself.
    url, _ = mock_server
    key = f"AIza-files-{uuid.uuid4().hex}"
    client = genai.Client(api_key=key, http_options=types.HttpOptions(base_url=url, api_version="v1beta"))
    names = [client.files.upload(file=io.BytesIO(b"note %d" % i), config={"mime_type": "text/plain"}).name
             for i in range(12)]
    pager = client.files.list()
    assert [f.name for f in pager.page] == names[:10]
    client.files.delete(name=names[9])      # the last one the first page gave
    pager.next_page()
    assert [f.name for f in pager.page] == names[10:]
    whole = httpx.get(url + "/v1beta/files", params={"pageSize": "500"}, headers={"x-goog-api-key": key}).json()
    assert [f["name"] for f in whole["files"]] == names[:9] + names[10:] and "nextPageToken" not in whole
