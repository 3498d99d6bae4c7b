"""Where the provider reports its own cost (OpenRouter's `usage.cost`), the ledger keeps it beside the price
table's, and the dashboard shows where they differ by over 1%; requests with neither are flagged unpriced,
never shown as $0. Through the JSON API and in a real headless Chromium, against the ledger's own records."""

from __future__ import annotations

import base64
from decimal import Decimal

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from prefixgate.cost import disagree
from prefixgate.ledger import read_records
from tests.gateway.dashboard.support_cost_check import cost_check_gateway
from tests.gateway.dashboard.test_dashboard_browser import ARTIFACTS, assert_reads_as, browser, loads  # noqa: F401 (fixture)
from tests.support_services import empty_postgres_ledger


def expected_check(records: list[dict]) -> dict:
    """The cost check by hand from the ledger's records."""
    compared = [r for r in records if r["provider_cost_usd"] is not None and r["cost_without_cache_usd"] is not None]
    differing = [r for r in compared if disagree(Decimal(r["provider_cost_usd"]), Decimal(r["cost_usd"]))]
    return {"compared": len(compared), "provider": _sum(compared, "provider_cost_usd"), "table": _sum(compared, "cost_usd"),
            "differing_provider": _sum(differing, "provider_cost_usd"), "differing_table": _sum(differing, "cost_usd"),
            "disagreements": len(differing),
            "priced_by_provider": sum(r["cost_usd"] is not None and r["cost_without_cache_usd"] is None for r in records),
            "unpriced": sum(r["cost_usd"] is None for r in records)}


def _sum(records: list[dict], key: str) -> Decimal:
    return sum((Decimal(r[key]) for r in records), Decimal(0))


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_settings(request) -> dict:
    """The replica's own SQLite ledger, or the fleet's Postgres one (emptied of an earlier test's tables)."""
    if request.param == "sqlite":
        return {}
    return {"ledger_url": empty_postgres_ledger(request.getfixturevalue("postgres_url"))}


def test_api_reports_the_cost_check_and_unpriced_requests(tmp_path, monkeypatch, ledger_settings):
    with cost_check_gateway(tmp_path, monkeypatch, **ledger_settings) as gw:
        assert httpx.get(gw.url + "/api/summary").json()["window"]["source"] == ("postgres" if ledger_settings else "sqlite")
        totals = httpx.get(gw.url + "/api/summary", params={"range": "1h"}).json()["totals"]
        by_model = {r["name"]: r for r in httpx.get(gw.url + "/api/breakdown", params={"range": "1h", "by": "model"}).json()["rows"]}
        listed = httpx.get(gw.url + "/api/requests", params={"range": "1h"}).json()["records"]
        records = read_records(gw.settings.ledger_path)
    want = expected_check(records)
    check = totals["cost_check"]
    # Both stale-priced gpt-4o-mini requests differ; the Claude one agrees; one priced by OpenRouter alone; one unpriced.
    assert (check["compared"], check["disagreements"], check["priced_by_provider"], totals["unpriced"]) == (3, 2, 1, 1)
    assert (check["compared"], check["disagreements"], check["priced_by_provider"], totals["unpriced"]) == \
        (want["compared"], want["disagreements"], want["priced_by_provider"], want["unpriced"])
    assert Decimal(check["provider_usd"]) == want["provider"] and Decimal(check["table_usd"]) == want["table"]
    assert Decimal(check["difference_usd"]) == want["provider"] - want["table"] < 0      # the stale table overcharges
    assert check["difference"] == pytest.approx(float((want["provider"] - want["table"]) / want["table"]))
    differing = check["disagreeing"]
    assert (Decimal(differing["provider_usd"]), Decimal(differing["table_usd"])) == (want["differing_provider"], want["differing_table"])
    # Over the two differing requests alone the gap is far wider than over all three compared (the Claude one agrees).
    assert differing["difference"] < check["difference"] < -0.01
    # The unpriced request is not in spend, and nothing is counted as $0.
    assert Decimal(totals["spend_usd"]) == sum(Decimal(r["cost_usd"]) for r in records if r["cost_usd"] is not None)
    assert by_model["openai/gpt-4o-mini"]["cost_check"]["disagreements"] == 2
    claude = by_model["anthropic/claude-sonnet-4.6"]["cost_check"]
    assert (claude["compared"], claude["disagreements"], claude["difference_usd"], claude["difference"]) == (1, 0, "0", 0)
    assert claude["provider_usd"] == claude["table_usd"] != "0"
    assert by_model["mystery/model-x"]["cost_check"]["priced_by_provider"] == 1
    assert by_model["deepseek-v9-unlisted"]["unpriced"] == 1 and by_model["deepseek-v9-unlisted"]["spend_usd"] == "0"
    # Scripts listing requests see both costs of each.
    assert {r["id"]: r["provider_cost_usd"] for r in listed} == {r["id"]: r["provider_cost_usd"] for r in records}


def test_page_shows_the_difference_and_the_unpriced_requests(tmp_path, monkeypatch, browser):  # noqa: F811
    with cost_check_gateway(tmp_path, monkeypatch) as gw:
        want = expected_check(read_records(gw.settings.ledger_path))
        browser.get(gw.url + "/dashboard")
        WebDriverWait(browser, 20).until(lambda d: loads(d) >= 1)
        box = browser.find_element(By.ID, "cost-check")
        assert box.is_displayed()
        differ = box.find_element(By.CSS_SELECTOR, 'li[data-check="disagreements"]')
        assert differ.get_attribute("data-value") == "2" and "2 of 3 request(s)" in differ.text
        assert "differ from the price table by over 1%" in differ.text
        # The amounts as a person reads them (over the differing requests, then over all compared), each the
        # ledger's to the page's precision.
        shown = [w.rstrip(",.:") for w in differ.text.split() if w.startswith("$")]
        assert len(shown) == 4
        for text, amount in zip(shown, ("differing_provider", "differing_table", "provider", "table"), strict=True):
            assert_reads_as(text, want[amount])
        unpriced = box.find_element(By.CSS_SELECTOR, 'li[data-check="unpriced"]')
        assert unpriced.get_attribute("data-value") == "1" and "not counted as $0" in unpriced.text
        assert "1 unpriced" in browser.find_element(By.ID, "sub-spend").text

        browser.find_element(By.CSS_SELECTOR, '#groupings button[data-by="model"]').click()
        rows = {r.get_attribute("data-name"): r for r in browser.find_elements(By.CSS_SELECTOR, "#breakdown-body tr")}
        check = {name: row.find_element(By.CSS_SELECTOR, "td.check") for name, row in rows.items()}
        assert "flagged" in check["openai/gpt-4o-mini"].get_attribute("class")
        assert "on 2 differing" in check["openai/gpt-4o-mini"].text
        assert check["anthropic/claude-sonnet-4.6"].text == "agrees with provider"
        assert "flagged" not in check["anthropic/claude-sonnet-4.6"].get_attribute("class")
        assert check["mystery/model-x"].text == "1 priced by provider"
        assert check["deepseek-v9-unlisted"].text == "1 unpriced"
        assert "flagged" in check["deepseek-v9-unlisted"].get_attribute("class")
        # Its money columns say so instead of showing $0.
        assert [td.text for td in rows["deepseek-v9-unlisted"].find_elements(By.CSS_SELECTOR, "td")[2:5]] == ["unpriced"] * 3
        ARTIFACTS.mkdir(exist_ok=True)
        png = browser.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        (ARTIFACTS / "dashboard-cost-check.png").write_bytes(base64.b64decode(png["data"]))
