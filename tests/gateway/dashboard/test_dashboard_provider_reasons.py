"""The provider's own miss reasons on the dashboard, in a real headless Chromium: after conversations whose
tools (Anthropic) and reasoning effort (OpenAI Responses) change between turns, driven by the real SDKs
through the gateway to mock-providers, the misses table's "why" is the provider's reason, with what it lost
and how often the inferred reason agreed; the spend forecast shows the budget lines."""

from __future__ import annotations

import base64
import uuid

import anthropic
import openai
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from prefixgate.simulation.mock.server import MockContext
from prefixgate.simulation.mock.server import create_app as mock_app
from tests.gateway.dashboard.test_dashboard_browser import ARTIFACTS, browser, loads  # noqa: F401 (a fixture)
from tests.gateway.support_gateway import policy_for, running_gateway, settings_for
from tests.gateway.test_gateway_diagnostics import GPT, POLICY, SYSTEM, _two_turns
from tests.support_services import ServerThread


def test_the_why_column_shows_the_providers_reason(tmp_path, browser):  # noqa: F811
    policy = {**POLICY, "budget": {"usd": 50, "warn_at": 0.8}}
    with ServerThread(mock_app(MockContext())) as mock:
        settings = settings_for(mock.url, tmp_path)
        with running_gateway(settings, policy=policy_for(settings, policy)) as gw:
            claude = anthropic.Anthropic(api_key="sk-ant-" + uuid.uuid4().hex, base_url=gw.url, max_retries=0)
            _two_turns(claude, "claude-sonnet-5-5", False)
            gpt = openai.OpenAI(api_key="sk-test-" + uuid.uuid4().hex, base_url=gw.url + "/v1", max_retries=0)
            first = gpt.responses.create(model=GPT, instructions=SYSTEM, input="Where is parcel 7?",
                                         reasoning={"effort": "low"})
            gpt.responses.create(model=GPT, instructions=SYSTEM, reasoning={"effort": "high"}, input=[
                {"role": "user", "content": "Where is parcel 7?"}, {"role": "assistant", "content": first.output_text},
                {"role": "user", "content": "And parcel 8?"}])

            browser.get(gw.url + "/dashboard")
            WebDriverWait(browser, 20).until(lambda d: loads(d) >= 1)
            claude_row = browser.find_element(By.CSS_SELECTOR, '#misses-body tr[data-route="claude"]')
            why = claude_row.find_element(By.CSS_SELECTOR, "td.why [data-provider-reason]")
            assert why.get_attribute("data-provider-reason") == "tools_changed"
            assert "tools changed" in why.text
            assert "our inference agreed on 1 of 1" in claude_row.text
            gpt_row = browser.find_element(By.CSS_SELECTOR, '#misses-body tr[data-route="gpt"]')
            assert gpt_row.find_element(By.CSS_SELECTOR, "td.why [data-provider-reason]").get_attribute(
                "data-provider-reason") == "reasoning_effort_changed"
            assert "reasoning effort changed" in gpt_row.text

            gateway = browser.find_element(By.CSS_SELECTOR, '#forecast-body tr[data-kind="gateway"]')
            assert "$50.00" in gateway.text and "$40.00" in gateway.text     # hard and soft (80%) lines
            assert gateway.find_elements(By.CSS_SELECTOR, "svg.budget line.soft")
            assert gateway.find_elements(By.CSS_SELECTOR, "svg.budget line.hard")
            assert "run rate" in browser.find_element(By.ID, "forecast-method").text
            ARTIFACTS.mkdir(exist_ok=True)
            png = browser.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
            (ARTIFACTS / "dashboard-provider-reasons.png").write_bytes(base64.b64decode(png["data"]))
