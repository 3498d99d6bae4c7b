"""The dashboard in a real headless Chromium: after a scripted burst through the gateway, the totals on
the page equal the ledger's, the misses view names the volatile span, the page refreshes itself while
requests flow, and a screenshot is saved to test-artifacts/dashboard.png. A tenant's reader, logged in with
its key, sees its tenant's spend and not another's."""

from __future__ import annotations

import base64
import shutil
import time
from decimal import Decimal
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from prefixgate.ledger import read_records
from tests.gateway.dashboard import support_tenants as two
from tests.gateway.dashboard.support_scenario import STATIC, burst, dashboard_gateway, send, wait_for_ledger
from tests.support_stack import policy_env, running_stack

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run")


@pytest.fixture
def browser():
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_bin:
        pytest.fail("chromium and chromedriver are not installed; `make test` installs them (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument("--window-size=1440,1000")
    driver = webdriver.Chrome(service=Service(driver_bin), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def shown_usd(text: str) -> Decimal:
    return Decimal(text.replace("$", "").replace(",", ""))


def assert_reads_as(text: str, expected: Decimal) -> None:
    """What a person reads is the amount: correctly rounded at the places the page chose to show, and
    those places enough to read it to 0.1% (or to the micro-dollar). Derived from the text itself, not
    from a copy of the page's formatting code."""
    assert text.startswith("-$" if expected < 0 else "$"), text
    places = len(text.split(".", 1)[1]) if "." in text else 0
    error = abs(shown_usd(text.replace("-", "")) * (-1 if expected < 0 else 1) - expected)
    assert error <= Decimal(5) / 10 ** (places + 1), (text, expected)
    assert error <= max(abs(expected) / 1000, Decimal("0.000001")), (text, expected)


def loads(driver) -> int:
    return int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") or 0)


def test_dashboard_shows_the_ledgers_totals_and_names_the_volatile_span(tmp_path, browser):
    with dashboard_gateway(tmp_path) as gw:
        burst(gw.url)
        wait_for_ledger(gw.url, 10)
        rows = read_records(gw.settings.ledger_path)
        assert len(rows) == 10
        spend = sum(Decimal(r["cost_usd"]) for r in rows)
        without = sum(Decimal(r["cost_without_cache_usd"]) for r in rows)
        savings = sum(Decimal(r["savings_usd"]) for r in rows)
        read = sum(r["cache_read"] for r in rows)
        prompt = sum(r["uncached_input"] + r["cache_read"] + sum(r["cache_writes"].values()) for r in rows)
        assert read > 0 and spend > 0  # docs-qa hits after its first request

        browser.get(gw.url + "/dashboard")
        WebDriverWait(browser, 20).until(lambda d: loads(d) >= 1)
        totals = {n.get_attribute("data-total"): n for n in browser.find_elements(By.CSS_SELECTOR, "[data-total]")}
        for key, expected in (("spend_usd", spend), ("spend_without_cache_usd", without), ("savings_usd", savings)):
            node = totals[key]
            assert Decimal(node.get_attribute("data-value")) == expected, key
            # What a person reads: the same amount to the page's precision.
            assert_reads_as(node.text, expected)
        assert totals["requests"].text == "10"
        assert totals["hit_rate"].text == f"{100 * read / prompt:.1f}%"

        misses = browser.find_element(By.CSS_SELECTOR, '#misses-body tr[data-route="support-bot"]')
        assert "volatile span in the prefix" in misses.text
        assert "timestamp" in misses.text and "system prompt" in misses.text
        kinds = [k.text for k in misses.find_elements(By.CSS_SELECTOR, "td.diff .kind")]
        assert kinds == ["timestamp"]
        ranked = [r.get_attribute("data-route") for r in browser.find_elements(By.CSS_SELECTOR, "#misses-body tr")]
        assert ranked[0] == "support-bot"   # it loses the most money to misses
        names = [r.get_attribute("data-name") for r in browser.find_elements(By.CSS_SELECTOR, "#breakdown-body tr")]
        assert sorted(names) == ["docs-qa", "support-bot"]
        assert browser.find_elements(By.CSS_SELECTOR, "#chart-spend rect.spend")
        assert browser.find_elements(By.CSS_SELECTOR, "#chart-hit circle.pt")

        # Live refresh: more traffic shows up without reloading the page.
        before = loads(browser)
        send(gw.url, "claude-sonnet-5", STATIC, "one more")
        WebDriverWait(browser, 20).until(lambda d: totals["requests"].text == "11")
        assert loads(browser) > before

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard.png"
        # The whole page, not only the viewport.
        png = browser.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        shot.write_bytes(base64.b64decode(png["data"]))
        assert shot.stat().st_size > 20_000


def test_the_page_polls_at_most_once_a_second_whatever_the_address_asks(tmp_path, browser):
    with dashboard_gateway(tmp_path) as gw:
        browser.get(f"{gw.url}/dashboard?refresh_ms=1")
        WebDriverWait(browser, 20).until(lambda d: loads(d) >= 1)
        first = loads(browser)
        time.sleep(2.5)     # a poll every millisecond would be hundreds of loads; at the floor, two or three
        assert loads(browser) - first <= 3


def test_a_tenant_readers_page_shows_its_own_spend_and_not_the_other_tenants(tmp_path, browser):
    two.write_two_tenants(tmp_path, time.time(), {})
    with running_stack(tmp_path, policy_env(tmp_path, two.POLICY, PREFIXGATE_ADMIN_TOKEN=two.ADMIN)) as (gw, _):
        browser.get(gw + "/dashboard")
        browser.find_element(By.NAME, "token").send_keys(two.READER)
        browser.find_element(By.TAG_NAME, "form").submit()
        WebDriverWait(browser, 20).until(lambda d: loads(d) >= 1)
        browser.find_element(By.CSS_SELECTOR, '#ranges button[data-range="24h"]').click()   # acme-old is 3 hours old
        totals = {n.get_attribute("data-total"): n for n in browser.find_elements(By.CSS_SELECTOR, "[data-total]")}
        WebDriverWait(browser, 20).until(lambda d: totals["requests"].text == str(two.ACME_REQUESTS))
        assert not browser.find_element(By.ID, "error").is_displayed()
        assert Decimal(totals["spend_usd"].get_attribute("data-value")) == two.ACME_SPEND
        assert_reads_as(totals["spend_usd"].text, two.ACME_SPEND)
        names = [r.get_attribute("data-name") for r in browser.find_elements(By.CSS_SELECTOR, "#breakdown-body tr")]
        assert sorted(names) == ["batch", "chat"]
        page = browser.find_element(By.TAG_NAME, "body").text
        assert "beta" not in page and "tenant acme" in page
        # Forecasts span every tenant: not drawn for its reader.
        assert not browser.find_element(By.ID, "forecast").is_displayed()
