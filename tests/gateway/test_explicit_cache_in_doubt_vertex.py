"""A Vertex context cache whose creation got no answer in time: Vertex may create it all the same and bill it. The
gateway searches the project's caches in the upstream's location (Vertex lists them per project and location, under
full resource names) for the cache's displayName, books and deletes it once found; a search that would read more
than its pages or time leaves it unresolved, on a ledger record that says so, instead of listing for long (a project
with thousands of caches). Driven with google-genai (vertexai=True) through the gateway, against mock-providers'
Vertex surface."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal

import httpx
import pytest
from google import genai
from google.genai import types
from google.oauth2.credentials import Credentials

from prefixgate.cache_planner import PlannerState
from prefixgate.gateway.app import create_app
from prefixgate.gateway.explicit_caches import ExplicitCaches
from prefixgate.ledger import read_records
from prefixgate.policies import hash_key
from prefixgate.simulation.mock.faults import FaultPlan
from prefixgate.simulation.mock.server import MockContext, tenant_of
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.support_gateway import policy_for, settings_for
from tests.gateway.support_vertex import (
    GEMINI,
    GEMINI_PRICE,
    LOCATION,
    PROJECT,
    STATIC_TOKEN,
    use_mock_vertex,
)
from tests.gateway.test_gateway_explicit_cache import SYSTEM, long_gap_history
from tests.support_services import ServerThread, wait_until

pytestmark = pytest.mark.slow
CALLER = "pg-vertex-doubt-acme-5521"
CACHES = f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/cachedContents"     # where the gateway creates and lists
SCOPE = f"projects/{PROJECT}/locations/{LOCATION}"


@dataclass
class Stack:
    caches: ExplicitCaches
    ledger: str
    mock: str
    ctx: MockContext

    def ask(self, gateway: str) -> None:
        """The tenant's request, on a route whose planner decides to create a context cache for its prefix."""
        client = genai.Client(vertexai=True, project="acme-project", location=LOCATION, credentials=Credentials(CALLER),
                              http_options=types.HttpOptions(base_url=gateway, headers={"x-prefixgate-route": "warranty"}))
        answer = client.models.generate_content(model=GEMINI, contents="Is my toaster covered?",
                                                config=types.GenerateContentConfig(system_instruction=SYSTEM))
        assert answer.text      # answered without the cache

    def made(self) -> dict:
        wait_until(lambda: any(r["kind"] == "cache_create" for r in read_records(self.ledger)), 15, "the cache's record")
        return next(r for r in read_records(self.ledger) if r["kind"] == "cache_create")

    def billed(self) -> list[dict]:
        """What Vertex bills the gateway's project for: every cache it made there, deleted ones too."""
        return [c for c in httpx.get(self.mock + "/_mock/vertex/cachedContents").json()["cachedContents"]
                if c["name"].startswith(SCOPE)]


@contextmanager
def vertex_stack(monkeypatch, folder, slow: str, budget: float | None = None, **tuning: float
                 ) -> Iterator[tuple[str, Stack]]:
    """(gateway URL, Stack): the route waits 0.5 s for Vertex, and Vertex answers the cache calls on `CACHES` after
    `slow` seconds (the creation always; its lists too with `slow_lists`); the caller's key has `budget` (USD)."""
    use_mock_vertex(monkeypatch)
    faults = FaultPlan.from_config({"faults": [{"fault": f"latency={slow}", "provider": "vertex", "path": CACHES,
                                                **({} if tuning.pop("slow_lists", 0) else {"times": 1})}]})
    state = PlannerState()
    long_gap_history(state, "tenant:acme/warranty")
    ctx = MockContext(faults=faults)
    with ServerThread(mock_app(ctx)) as mock:
        settings = settings_for(mock.url, folder, vertex_base_url=mock.url)
        policy = policy_for(settings, {
            "routes": [{"name": "flash", "models": [GEMINI], "retry": {"attempts": 1, "timeout_s": 0.5},
                        "targets": [{"upstream": "vertex"}]}],
            "keys": [{"name": "acme", "key_sha256": hash_key(CALLER), "tenant": "acme",
                      **({"budget": {"usd": budget, "period": "total"}} if budget is not None else {})}]})
        app = create_app(settings, policy=policy, planner_state=state)
        with ServerThread(app) as gw:
            caches = app.state.proxy.caches
            caches.tick_s = 0.4
            for name, value in tuning.items():
                setattr(caches, name, value)
            yield gw.url, Stack(caches, settings.ledger_path, mock.url, ctx)


def test_a_vertex_cache_whose_creation_timed_out_is_found_in_its_location_billed_and_deleted(monkeypatch, tmp_path):
    with vertex_stack(monkeypatch, tmp_path, "1.5") as (gateway, stack):
        stack.ask(gateway)
        made = stack.made()
        # Deleted at Vertex: the gateway's project holds no cache in that location (google-genai's caches.list).
        vertex = genai.Client(vertexai=True, project=PROJECT, location=LOCATION, credentials=Credentials(STATIC_TOKEN),
                              http_options=types.HttpOptions(base_url=stack.mock))
        assert list(vertex.caches.list()) == []
        [billed] = stack.billed()
    assert billed["deleted"] and billed["displayName"].startswith("prefixgate-")
    assert billed["name"] in " ".join(made["explanation"]) and "deleted" in made["explanation"][0]
    assert made["key"] == "acme" and made["target"] == "vertex" and made["provider"] == "vertex"
    assert made["cache_writes"]["explicit"] == billed["tokens"] > 1000
    # Its tokens at Vertex's input rate for gemini-3.5-flash ($1.50/MTok) and the few seconds of storage it used.
    writing = billed["tokens"] * GEMINI_PRICE["input"] / 1_000_000
    assert writing <= Decimal(made["cost_usd"]) < writing * Decimal("1.01")


def test_a_search_past_its_pages_leaves_the_cache_unresolved_and_says_so(monkeypatch, tmp_path):
    # The project already holds 12 caches; a search reads 2 pages of 5.
    with vertex_stack(monkeypatch, tmp_path, "1.5", page_size=5, find_pages=2) as (gateway, stack):
        body = {"model": f"models/{GEMINI}", "systemInstruction": {"parts": [{"text": SYSTEM}]}}
        for _ in range(12):
            stack.ctx.simulator.create_cached_content(body, now=stack.ctx.clock(), tenant=tenant_of(f"vertex:{SCOPE}"))
        stack.ask(gateway)
        made = stack.made()
        wait_until(lambda: len(stack.billed()) == 13, 5, "Vertex finishing the creation")
        doubted = [c for c in stack.billed() if c.get("displayName", "").startswith("prefixgate-")]
    assert [c["deleted"] for c in doubted] == [False]       # not found, so not deleted: it lives out its TTL
    note = made["explanation"][0]
    assert note.startswith("cache: unresolved:") and "past 2 pages of 5" in note and doubted[0]["displayName"] in note
    assert made["cost_usd"] is None and not made["cache_writes"]     # no known cost, rather than a guessed one


def test_a_search_past_its_time_leaves_the_cache_unresolved(monkeypatch, tmp_path):
    # Every cache call takes 1 s at Vertex, a list page included; a search may take 0.3 s.
    with vertex_stack(monkeypatch, tmp_path, "1", find_s=0.3, slow_lists=1) as (gateway, stack):
        stack.ask(gateway)
        made = stack.made()
    note = made["explanation"][0]
    assert note.startswith("cache: unresolved:") and "not read to its end in 0.3 s (0 pages)" in note
