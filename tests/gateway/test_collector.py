"""The gateway process collects cycles less often than CPython's default (gateway/collector.py): its
requests' objects die by reference counting, and young collections while they live only promote them."""

from __future__ import annotations

import gc

from fastapi.testclient import TestClient

from prefixgate.gateway.app import create_app
from prefixgate.gateway.collector import YOUNG_THRESHOLD, collect_less
from tests.gateway.support_gateway import settings_for


def test_a_started_gateway_raises_the_young_threshold_and_keeps_the_others(tmp_path):
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with TestClient(create_app(settings_for("http://127.0.0.1:9", tmp_path)), base_url="http://localhost") as client:
            assert client.get("/health").status_code == 200
            assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_a_higher_threshold_already_set_is_kept():
    before = gc.get_threshold()
    try:
        gc.set_threshold(YOUNG_THRESHOLD * 5, 10, 10)
        collect_less()
        assert gc.get_threshold() == (YOUNG_THRESHOLD * 5, 10, 10)
    finally:
        gc.set_threshold(*before)
