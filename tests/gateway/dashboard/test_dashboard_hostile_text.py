"""Caller text on the operator's dashboard is text, never markup: a caller (any tenant's key, anyone on an
open gateway) picks the model name, the x-prefixgate-route hint and the prompt, and the gateway stores
them (the model in the breakdown, the planner's lines quoting it in the misses view) for the operator's
page, whose session holds the admin cookie. A real gateway, a real headless Chromium logged in as the admin;
and the headers that keep the page and its files strict, and keep errors from reflecting input as HTML."""

from __future__ import annotations

import httpx
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from prefixgate.usage import Usage
from tests.gateway.dashboard.support_scenario import HEADERS, STATIC
from tests.gateway.dashboard.test_dashboard_browser import browser, loads  # noqa: F401 (fixture)
from tests.gateway.support_gateway import policy_for, running_gateway, running_upstream, settings_for
from tests.support_services import wait_until

TOKEN = "admin-secret-hostile-0001"
AUTH = {"authorization": f"Bearer {TOKEN}"}
TITLE = "prefixgate · cost dashboard"
# Each would set window.__xss and the title if it ran; `</script>` has a slash, so the route matches `**`.
IMG = """claude-x"><img src=x onerror="window.__xss='img';document.title='pwned'">"""
SCRIPT = """claude-y'"><script>window.__xss='script';document.title='pwned'</script>"""
HINT = """hint"><img src=x onerror="window.__xss='hint';document.title='pwned'">"""
ROUTES = [{"name": "open", "models": ["**"], "targets": [{"upstream": "anthropic"}]}]


@pytest.fixture
def hostile(tmp_path):
    """A gateway whose ledger holds two misses for each hostile model name, sent with a hostile route hint,
    user agent and prompt; the upstream answers any model (and reads nothing from cache: every request misses).
    The route hint only names the planner's state (nothing on the page shows it): it must simply never run."""
    with running_upstream() as up:
        up.usage = Usage(uncached_input=1200, cache_read=0, cache_writes={}, output=5)
        settings = settings_for(up.url, tmp_path, admin_token=TOKEN)
        with running_gateway(settings, policy=policy_for(settings, {"routes": ROUTES})) as gw:
            for model in (IMG, SCRIPT):
                for i in range(2):
                    r = httpx.post(gw.url + "/v1/messages", timeout=30,
                                   headers={**HEADERS, "x-prefixgate-route": HINT, "user-agent": HINT},
                                   json={"model": model, "max_tokens": 8, "system": f"{HINT} {STATIC}",
                                         "messages": [{"role": "user", "content": f"{SCRIPT} {i}"}]})
                    assert r.status_code == 200, r.text
            wait_until(lambda: httpx.get(gw.url + "/api/summary", headers=AUTH).json()["totals"]["requests"] >= 4,
                       30, "4 ledger records")
            yield gw


def test_hostile_model_names_and_route_hints_are_shown_as_text(hostile, browser):  # noqa: F811
    records = httpx.get(hostile.url + "/api/requests", headers=AUTH).json()["records"]
    assert {r["model"] for r in records} == {IMG, SCRIPT}
    # The operator logs in through the page's form, as a person does: the admin cookie is the prize.
    browser.get(hostile.url + "/dashboard")
    browser.find_element(By.NAME, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "form button").click()
    # Until the page that replaced the form has polled twice (the broken images have had time to fail).
    WebDriverWait(browser, 20, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: loads(d) >= 2)
    browser.find_element(By.ID, "pause").click()
    browser.find_element(By.CSS_SELECTOR, '#groupings button[data-by="model"]').click()
    # Read in one go: a poll in flight when the page paused may still redraw the rows.
    shown = browser.execute_script("""
        const miss = document.querySelector('#misses-body tr[data-route="open"]');
        return {
          rows: [...document.querySelectorAll("#breakdown-body tr")].map((r) => [r.dataset.name, r.cells[0].textContent]),
          latest: miss.querySelector("td .fix").textContent,
          plan: [...miss.querySelectorAll("details li")].map((li) => li.textContent),
        };""")
    assert sorted(shown["rows"]) == sorted([[IMG, IMG], [SCRIPT, SCRIPT]])
    assert shown["latest"] in (IMG, SCRIPT)
    # The planner's lines quote the model ("passthrough: model: ... is not a known anthropic model").
    assert any(shown["latest"] in line for line in shown["plan"]), shown["plan"]

    assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script, main [onerror]")
    assert browser.execute_script("return window.__xss === undefined")
    assert browser.title == TITLE


def test_the_page_and_its_files_are_strict_and_errors_reflect_nothing_as_html(hostile):
    with httpx.Client(base_url=hostile.url) as client:
        pages = [client.get("/dashboard"), client.get("/dashboard", headers=AUTH),
                 client.get("/dashboard", params={"token": IMG}), client.post("/dashboard/login", data={"token": IMG})]
        for page in pages:
            assert page.headers["content-type"].startswith("text/html")
            assert "<img" not in page.text and "onerror" not in page.text
            csp = [d.strip() for d in page.headers["content-security-policy"].split(";")]
            for directive in ("script-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'",
                              "form-action 'self'"):
                assert directive in csp, (directive, csp)
            assert "unsafe-inline" not in page.headers["content-security-policy"]
            assert "unsafe-eval" not in page.headers["content-security-policy"]
            assert page.headers["x-content-type-options"] == "nosniff" and page.headers["referrer-policy"] == "same-origin"
        for name in ("dashboard.js", "dashboard.css", "favicon.svg"):
            asset = client.get("/dashboard/static/" + name)
            assert asset.status_code == 200 and asset.headers["x-content-type-options"] == "nosniff", name
            assert "default-src" in asset.headers["content-security-policy"], name
        missing = client.get("/dashboard/static/" + IMG)
        assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/plain")
        # The API answers JSON, errors included, whatever the input carries.
        for path, params in (("/api/overview", {}), ("/api/requests", {}), ("/api/requests/" + IMG, {}),
                             ("/api/overview", {"range": IMG}), ("/api/" + IMG, {}), ("/api/breakdown", {"by": IMG})):
            r = client.get(path, params=params, headers=AUTH)
            assert r.headers["content-type"].startswith("application/json"), (path, params, r.headers["content-type"])
        assert client.get("/api/overview", params={"range": IMG}).headers["content-type"].startswith("application/json")
