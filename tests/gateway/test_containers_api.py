"""OpenAI's Containers API through the gateway (the real openai SDK, the gateway in front of the mock providers):
behind the gateway's one OpenAI key every tenant's containers are one organisation's, so the gateway alone keeps
tenant B from reading, listing, filling or deleting tenant A's container and the files a code interpreter wrote
there, and answers B's naming of A's container exactly as it answers an id that never existed."""

from __future__ import annotations

from contextlib import ExitStack

import anthropic
import httpx
import openai
import pytest

from prefixgate.policies import hash_key
from prefixgate.simulation.mock.code_execution import OUTPUT
from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.support_services import ServerThread

ACME, ACME_2, BETA, SOLO = "pg-acme-cntr-0123456", "pg-acme-cntr-2-01234", "pg-beta-cntr-0123456", "pg-solo-cntr-0123456"
TIDY, COPIER = "pg-tidy-cntr-0123456", "pg-copier-cntr-01234"
GPT = "gpt-5.4"
POLICY = {
    "routes": [{"name": "gpt", "models": ["gpt-*"], "targets": [{"upstream": "openai"}]}],
    "keys": [{"name": "acme", "key_sha256": hash_key(ACME), "tenant": "acme"},
             {"name": "acme-2", "key_sha256": hash_key(ACME_2), "tenant": "acme"},
             {"name": "beta", "key_sha256": hash_key(BETA), "tenant": "beta"},
             {"name": "solo", "key_sha256": hash_key(SOLO), "tenant": "solo", "uploads": {"max_files": 1}},
             {"name": "tidy", "key_sha256": hash_key(TIDY), "tenant": "tidy", "uploads": {"max_files": 1}},
             {"name": "copier", "key_sha256": hash_key(COPIER), "tenant": "copier", "uploads": {"max_files": 2}}]}
UPLOAD_MB = 1       # the gateway's max_upload_mb here, so a refused upload is small
NEVER = "cntr_" + "0" * 48      # an id no organisation holds


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    folder = tmp_path_factory.mktemp("containers")
    mp = pytest.MonkeyPatch()
    mp.setenv("OPENAI_API_KEY", "sk-gateway-own-000000")
    with ExitStack() as stack:
        stack.callback(mp.undo)
        mock = stack.enter_context(ServerThread(mock_app(MockContext()))).url
        settings = settings_for(mock, folder, max_upload_mb=UPLOAD_MB)
        yield stack.enter_context(running_gateway(settings, policy=policy_for(settings, POLICY))).url


def oai(url: str, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)


def refusals(client: openai.OpenAI, container: str, file_id: str) -> list[openai.APIStatusError]:
    """What each call about `container` (and its file `file_id`) answers `client`."""
    calls = [lambda: client.containers.retrieve(container), lambda: client.containers.delete(container),
             lambda: client.containers.files.list(container),
             lambda: client.containers.files.create(container, file=("x.csv", b"a,b\n")),
             lambda: client.containers.files.retrieve(file_id, container_id=container),
             lambda: client.containers.files.content.retrieve(file_id, container_id=container).read(),
             lambda: client.containers.files.delete(file_id, container_id=container)]
    found = []
    for call in calls:
        with pytest.raises(openai.NotFoundError) as refused:
            call()
        found.append(refused.value)
    return found


def test_a_container_and_its_files_are_its_tenants_alone(gw):
    acme, acme_2, beta = oai(gw, ACME), oai(gw, ACME_2), oai(gw, BETA)
    made = acme.containers.create(name="analysis")
    assert made.object == "container" and made.status == "running" and made.expires_after.minutes == 20
    added = acme.containers.files.create(made.id, file=("sales.csv", b"region,units\nnorth,4417\n"))
    assert (added.object, added.path, added.source, added.bytes) == ("container.file", "/mnt/data/sales.csv", "user", 24)
    # The tenant's other key reads it all.
    assert acme_2.containers.retrieve(made.id).name == "analysis"
    assert [f.id for f in acme_2.containers.files.list(made.id)] == [added.id]
    assert acme_2.containers.files.content.retrieve(added.id, container_id=made.id).read() == b"region,units\nnorth,4417\n"
    # Another tenant: OpenAI's 404 for an unknown container on every call, worded exactly as for an id nobody
    # holds (no existence oracle), never forwarded.
    seen = refusals(beta, made.id, added.id)
    unknown = refusals(beta, NEVER, added.id)
    for theirs, nobodys in zip(seen, unknown, strict=True):
        assert theirs.body == {**nobodys.body, "message": nobodys.body["message"].replace(NEVER, made.id)}
        assert theirs.body["message"] == f"Container with id '{made.id}' not found."
        assert "4417" not in str(theirs.body)
    # It is still there, untouched (beta's delete was refused), with its one file.
    assert [f.id for f in acme.containers.files.list(made.id)] == [added.id]
    acme.containers.files.delete(added.id, container_id=made.id)
    assert list(acme.containers.files.list(made.id)) == []
    acme.containers.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        acme.containers.retrieve(made.id)


def test_the_list_is_the_tenants_own_containers_paged_as_openai_pages(gw):
    acme, beta = oai(gw, ACME), oai(gw, BETA)
    mine, theirs = [], []
    for i in range(3):      # interleaved in the organisation's one list
        mine.append(acme.containers.create(name=f"acme-{i}").id)
        theirs.append(beta.containers.create(name=f"beta-{i}").id)
    page = acme.containers.list(limit=2)
    assert page.has_more and {c.id for c in page.data} <= set(mine)
    assert page.first_id == page.data[0].id and page.last_id == page.data[-1].id
    # Every page, as the SDK walks them (`after` its last id): acme's all, newest first, and none of beta's.
    listed = [c.id for c in acme.containers.list(limit=2)]
    assert [i for i in listed if i in mine + theirs] == mine[::-1]
    assert not set(listed) & set(theirs)
    assert [c.id for c in beta.containers.list(order="asc") if c.id in mine + theirs] == theirs
    assert [c.id for c in acme.containers.list(name="acme-1")] == [mine[1]]


def test_a_code_interpreters_file_is_downloaded_by_its_tenant(gw):
    acme, beta = oai(gw, ACME), oai(gw, BETA)
    answer = acme.responses.create(model=GPT, tools=[{"type": "code_interpreter", "container": {"type": "auto"}}],
                                   input="Write the totals to a file.")
    cited = [a for item in answer.output if item.type == "message" for part in item.content
             for a in part.annotations if a.type == "container_file_citation"]
    assert len(cited) == 1 and cited[0].container_id == answer.output[0].container_id
    file = acme.containers.files.retrieve(cited[0].file_id, container_id=cited[0].container_id)
    assert (file.source, file.path) == ("assistant", f"/mnt/data/{cited[0].filename}")
    assert acme.containers.files.content.retrieve(cited[0].file_id, container_id=cited[0].container_id).read() == OUTPUT
    assert cited[0].container_id in [c.id for c in acme.containers.list()]
    with pytest.raises(openai.NotFoundError):
        beta.containers.files.content.retrieve(cited[0].file_id, container_id=cited[0].container_id)
    assert cited[0].container_id not in [c.id for c in beta.containers.list()]


def test_files_copied_in_are_the_tenants_own(gw):
    acme, beta = oai(gw, ACME), oai(gw, BETA)
    uploaded = acme.files.create(file=("notes.txt", b"launch code 4417"), purpose="user_data")
    # Acme copies its File into a container, at its creation and after.
    made = acme.containers.create(name="copies", file_ids=[uploaded.id])
    assert acme.containers.files.list(made.id).data[0].bytes == 16
    copied = httpx.post(f"{gw}/v1/containers/{made.id}/files", json={"file_id": uploaded.id},
                        headers={"authorization": f"Bearer {ACME}"})
    assert copied.status_code == 200 and copied.json()["path"] == "/mnt/data/notes.txt"
    # Beta may not copy acme's File into a container of its own: OpenAI's 404 for a File it does not hold.
    with pytest.raises(openai.NotFoundError) as refused:
        beta.containers.create(name="stolen", file_ids=[uploaded.id])
    assert refused.value.body["message"] == f"File with id '{uploaded.id}' not found."
    own = beta.containers.create(name="own")
    r = httpx.post(f"{gw}/v1/containers/{own.id}/files", json={"file_id": uploaded.id},
                   headers={"authorization": f"Bearer {BETA}"})
    assert r.status_code == 404 and r.json()["error"]["message"] == f"File with id '{uploaded.id}' not found."
    # Nor name it in a form, which OpenAI reads `file_id` from too (its SDK sends one whenever a `file` is given).
    with pytest.raises(openai.BadRequestError) as refused:
        beta.containers.files.create(own.id, file_id=uploaded.id, extra_headers={"content-type": "multipart/form-data"})
    assert "file_id" in refused.value.message
    assert list(beta.containers.files.list(own.id)) == []


def test_files_added_to_a_container_are_held_to_the_upload_limits(gw):
    solo = oai(gw, SOLO)
    made = solo.containers.create(name="quota")
    first = solo.containers.files.create(made.id, file=("a.txt", b"one"))
    # The tenant's one file (uploads.max_files: 1) is taken: another is refused before it is sent.
    with pytest.raises(openai.PermissionDeniedError) as refused:
        solo.containers.files.create(made.id, file=("b.txt", b"two"))
    assert "uploads.max_files" in refused.value.message
    with pytest.raises(openai.PermissionDeniedError):
        solo.files.create(file=("c.txt", b"three"), purpose="user_data")
    solo.containers.files.delete(first.id, container_id=made.id)        # its share is free again
    assert solo.containers.files.create(made.id, file=("b.txt", b"two")).id
    # Over the gateway's max_upload_mb: a 413 in OpenAI's shape.
    with pytest.raises(openai.APIStatusError) as refused:
        oai(gw, ACME).containers.files.create(acme_container(gw), file=("big.bin", b"x" * (UPLOAD_MB << 21)))
    assert refused.value.status_code == 413 and "max_upload_mb" in refused.value.message
    assert [f.path for f in solo.containers.files.list(made.id)] == ["/mnt/data/b.txt"]


def test_a_deleted_containers_files_no_longer_count(gw):
    tidy = oai(gw, TIDY)
    made = tidy.containers.create(name="scratch")
    tidy.containers.files.create(made.id, file=("a.txt", b"one"))
    tidy.containers.delete(made.id)     # its files go with it
    # The tenant's one file (uploads.max_files: 1) is free again at once, not once the container's 20 idle minutes
    # have passed.
    assert tidy.files.create(file=("b.txt", b"two"), purpose="user_data").id


def test_files_copied_in_at_creation_count_as_files_added_do(gw):
    copier = oai(gw, COPIER)
    kept = copier.files.create(file=("kept.txt", b"kept"), purpose="user_data")
    first = copier.containers.create(name="copy-1", file_ids=[kept.id])        # its second file of 2 (max_files)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        copier.containers.create(name="copy-2", file_ids=[kept.id])
    assert "uploads.max_files" in refused.value.message
    copier.containers.delete(first.id)      # the copy goes with it
    assert copier.containers.files.list(copier.containers.create(name="copy-3", file_ids=[kept.id]).id).data


def test_a_list_cursor_naming_another_tenants_id_answers_as_one_nobody_holds(gw):
    acme, beta = oai(gw, ACME), oai(gw, BETA)
    beta.containers.create(name="beta-older")
    beta.files.create(file=("older.txt", b"beta"), purpose="user_data")
    container = acme.containers.create(name="acme-cursor").id
    file = acme.files.create(file=("cursor.txt", b"acme"), purpose="user_data").id
    auth = {"authorization": f"Bearer {BETA}"}
    for path, theirs in (("/v1/containers", container), ("/v1/files", file)):
        # Beta's older ones follow acme's id in the organisation's one list: paging after it must not show that it
        # exists, nor where it sits.
        named, nobodys = (httpx.get(f"{gw}{path}", params={"after": after}, headers=auth) for after in (theirs, NEVER))
        assert (named.status_code, named.json()) == (nobodys.status_code, nobodys.json()), path
        assert nobodys.status_code == 200 and nobodys.json()["data"] == [], nobodys.text


def acme_container(gw: str) -> str:
    return oai(gw, ACME).containers.create(name="big").id


def test_other_formats_callers_get_their_own_404(gw):
    with pytest.raises(anthropic.NotFoundError) as refused:
        anthropic.Anthropic(base_url=gw, api_key=ACME, max_retries=0).get("/v1/containers", cast_to=object)
    assert refused.value.body["error"]["type"] == "not_found_error"
    # A base URL without /v1 reaches the same endpoints.
    r = httpx.get(f"{gw}/containers/{NEVER}", headers={"authorization": f"Bearer {BETA}"})
    assert r.status_code == 404 and r.json()["error"]["message"] == f"Container with id '{NEVER}' not found."


def test_the_mocks_container_expires_after_its_idle_minutes():
    # OpenAI's code interpreter guide: a container expires after 20 minutes without use (`expires_after` sets it).
    now = [1_800_000_000.0]
    with ServerThread(mock_app(MockContext(clock=lambda: now[0]))) as mock:
        client = openai.OpenAI(base_url=f"{mock.url}/v1", api_key="sk-mock-org-0001", max_retries=0)
        short = client.containers.create(name="short", expires_after={"anchor": "last_active_at", "minutes": 5})
        default = client.containers.create(name="default")
        now[0] += 4 * 60
        client.containers.files.create(short.id, file=("a.txt", b"a"))      # adding a file uses it
        now[0] += 4 * 60
        assert client.containers.retrieve(short.id).last_active_at == int(now[0]) - 4 * 60
        now[0] += 13 * 60       # 21 minutes since the default one was made, 17 since the short one was used
        assert [c.id for c in client.containers.list()] == []
        for gone in (short.id, default.id):
            with pytest.raises(openai.NotFoundError) as refused:
                client.containers.retrieve(gone)
            assert refused.value.body["message"] == f"Container with id '{gone}' not found."
