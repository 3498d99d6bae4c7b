"""Warm start (gateway/warm_start.py): the gateway loads what a first request would, before it accepts a
connection, leaves no trace of doing so, and still serves when the warm-up fails."""

from __future__ import annotations

import logging
import threading

import httpx
import pytest

from prefixgate.cache_planner import PlannerState
from prefixgate.gateway import warm_start
from prefixgate.gateway.app import create_app
from prefixgate.ledger import read_records
from prefixgate.providers.rules import default_catalog
from tests.gateway.support_gateway import running_upstream, settings_for
from tests.support_services import ServerThread, wait_until


def test_the_warm_start_runs_every_caller_format_and_leaves_no_trace(tmp_path):
    assert warm_start.warm(default_catalog()) > 0
    state = PlannerState()
    with running_upstream() as upstream:
        settings = settings_for(upstream.url, tmp_path)
        with ServerThread(create_app(settings, planner_state=state)) as gateway:
            assert httpx.get(gateway.url + "/health").json()["status"] == "ok"
            metrics = httpx.get(gateway.url + "/metrics").text
    assert upstream.received == []                       # no upstream call
    assert read_records(settings.ledger_path) == []      # no ledger record
    assert not state.routes                              # nothing learned
    assert "prefixgate_requests_total{" not in metrics      # no request counted


def test_nothing_is_served_before_the_warm_start_ends(tmp_path, monkeypatch):
    started, release = threading.Event(), threading.Event()

    def slow_warm(catalog):  # noqa: ANN001, ANN202
        started.set()
        release.wait(30)
        return 0.0

    monkeypatch.setattr(warm_start, "warm", slow_warm)
    server = ServerThread(create_app(settings_for("http://127.0.0.1:9", tmp_path)))
    server.thread.start()
    try:
        assert started.wait(30)
        with pytest.raises(httpx.ConnectError):
            httpx.get(server.url + "/health", timeout=2)
        release.set()
        wait_until(lambda: server.server.started, 30, "gateway started after its warm start")
        assert httpx.get(server.url + "/health").json()["status"] == "ok"
    finally:
        release.set()
        server.__exit__(None, None, None)


def test_a_failed_warm_start_is_logged_and_the_gateway_serves(tmp_path, monkeypatch, caplog):
    def broken(catalog):  # noqa: ANN001, ANN202
        raise RuntimeError("no tokenizer table")

    monkeypatch.setattr(warm_start, "warm", broken)
    with caplog.at_level(logging.ERROR, logger="prefixgate.gateway"):
        with ServerThread(create_app(settings_for("http://127.0.0.1:9", tmp_path))) as gateway:
            assert httpx.get(gateway.url + "/health").json()["status"] == "ok"
    assert any("warm start failed" in r.getMessage() and "no tokenizer table" in (r.exc_text or str(r.exc_info))
               for r in caplog.records)
