"""Alerts that push, to real local HTTP receivers: every rule fires within one evaluation of the ledger
that makes it hold, once per cooldown, in the structured and the Slack body; `prefixgate alerts test`
reaches every destination and names a dead one; a receiver that hangs or refuses never holds a request up
and the ledger loses nothing. The alerter's clock is the test's: no waiting for minutes."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from dataclasses import fields
from datetime import UTC, datetime, timedelta

import anthropic
import httpx
import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from prefixgate.cli import main
from prefixgate.gateway.app import create_app
from prefixgate.gateway.dashboard.alert_rules import RULES
from prefixgate.ledger import LedgerRecord, read_records
from prefixgate.policies import PolicyError
from prefixgate.providers.rules import ModelRules
from tests.gateway.support_gateway import policy_for, running_upstream, settings_for
from tests.support_services import ServerThread, free_port, wait_until

SECRET = "T0001/B0002/s3cr3t-hook-token"
CATALOGUE_RETIRES = "retires" in {f.name for f in fields(ModelRules)}
MODEL = "claude-sonnet-5-5"


class Receiver:
    """A webhook receiver: keeps each POST's JSON body; `hold` makes it keep the request open until released."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, dict]] = []
        self.hold = False
        self.holding = 0
        self.release = threading.Event()

    def app(self) -> Starlette:
        async def hook(request: Request) -> JSONResponse:
            body = json.loads(await request.body())
            if self.hold:
                self.holding += 1
                while not self.release.is_set():
                    await asyncio.sleep(0.02)
            self.bodies.append((request.url.path, body))
            return JSONResponse({"ok": True})
        return Starlette(routes=[Route("/{path:path}", hook, methods=["POST"])])

    def rules(self, path: str) -> list[str]:
        return [b["rule"] for p, b in self.bodies if p == path]

    def texts(self, path: str) -> list[str]:
        return [b["text"] for p, b in self.bodies if p == path]


def _record(ts: float, route: str, **kw) -> LedgerRecord:
    base = dict(id=uuid.uuid4().hex[:20], ts=ts, key="team-a", route=route, target="anthropic", provider="anthropic",
                model=MODEL, dialect="anthropic", status=200, uncached_input=2000, output=20,
                cost_usd="0.0042", cost_without_cache_usd="0.0042", savings_usd="0")
    return LedgerRecord(**{**base, **kw})


def _seed(ledger, now: float) -> None:
    """A ledger on which every rule holds at `now`."""
    for i in range(6):      # hit rate 90% over the baseline, then 0% in the last five minutes
        ledger.append(_record(now - 1800 + i, "drop", uncached_input=100, cache_read=900))
        ledger.append(_record(now - 60 + i, "drop"))
    for i in range(6):      # every request writes the prefix, none reads it: writes cost more than they save
        ledger.append(_record(now - 120 + i, "writes", uncached_input=0, cache_writes={"5m": 4000},
                              cost_usd="0.0102", cost_without_cache_usd="0.0082", savings_usd="-0.002",
                              explanation=["checkpoint: segment 0 ttl 5m"]))
    for i in range(4):      # the same prompt every ten minutes, against a five-minute TTL
        ledger.append(_record(now - 2400 + 600 * i, "sparse", cache_writes={"5m": 2000}, uncached_input=10,
                              explanation=["checkpoint: segment 0 ttl 5m"]))
    for i in range(3):      # an upstream that fails three requests in four
        ledger.append(_record(now - 30 + i, "flaky", status=502, error="upstream 502", uncached_input=0, output=0,
                              cost_usd=None, cost_without_cache_usd=None, savings_usd=None))
    ledger.append(_record(now - 20, "flaky"))


POLICY = {
    "routes": [{"name": "claude", "models": ["claude-*"], "targets": [{"upstream": "anthropic"}]}],
    "keys": [{"name": "team-a", "key_env": "PG_TEST_ALERT_KEY", "budget": {"usd": 1000, "warn_at": 0.00001}}],
    "budget": {"usd": 0.01, "warn_at": 0.5},
    "alerts": {"interval_s": 0.1, "cooldown_s": 60, "min_requests": 1, "min_misses": 2, "error_count": 2,
               "forecast_after_s": 0, "retiring_within_days": 30, "delivery_attempts": 2, "delivery_backoff_s": 0.05},
}


@pytest.fixture
def receiver():
    rec = Receiver()
    with ServerThread(rec.app()) as server:
        rec.url = server.url
        yield rec
        rec.release.set()


def _gateway_app(tmp_path, monkeypatch, upstream_url: str, policy: dict, **settings):
    monkeypatch.setenv("PG_TEST_ALERT_KEY", "pg-test-key-" + uuid.uuid4().hex)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    s = settings_for(upstream_url, tmp_path, **settings)
    return create_app(s, policy=policy_for(s, policy)), s


def test_every_rule_reaches_the_receivers_once_per_cooldown(tmp_path, monkeypatch, receiver, caplog):
    hooks = [f"{receiver.url}/json/{SECRET}", {"url": f"{receiver.url}/slack/{SECRET}", "format": "slack"}]
    extra = {}
    if CATALOGUE_RETIRES:   # the catalogue's retirement dates (where its rows carry them): one that is near
        soon = (datetime.now(UTC) + timedelta(days=10)).date().isoformat()
        (tmp_path / "providers.toml").write_text(f'[[model]]\nprovider = "anthropic"\nid = "{MODEL}"\nretires = "{soon}"\n')
        extra["providers_file"] = str(tmp_path / "providers.toml")
    app, settings = _gateway_app(tmp_path, monkeypatch, "http://127.0.0.1:9", {**POLICY, "alert_webhooks": hooks}, **extra)
    caplog.set_level("INFO", logger="prefixgate.alerts")
    with ServerThread(app) as gw:
        alerter = app.state.alerter
        sent_in_pass: list[int] = []        # which pass handed each alert to delivery (delivery itself takes its time)
        send = alerter.deliveries.send
        monkeypatch.setattr(alerter.deliveries, "send", lambda alert: (sent_in_pass.append(alerter.passes), send(alert)))
        now = time.time()
        alerter.clock = lambda: now
        _seed(app.state.proxy.ledger, now)
        seeded_at = alerter.passes
        expected = set(RULES) - ({"model_retiring"} if not CATALOGUE_RETIRES else set())
        wait_until(lambda: expected <= set(receiver.rules("/json/" + SECRET)), 20, "every alert kind at the receiver")
        # Sent by the first pass that read the seeded ledger (the one running as the seeding ended, or the next),
        # however long a loaded machine then takes to deliver them.
        assert sent_in_pass and max(sent_in_pass) <= seeded_at + 1, (sent_in_pass, seeded_at)
        first = receiver.rules("/json/" + SECRET)
        subjects = {(b["rule"], b["subject"]) for p, b in receiver.bodies if p == "/json/" + SECRET}
        assert {("hit_rate_drop", "drop"), ("caching_costs_more", "writes"), ("ttl_expiry_share", "sparse"),
                ("error_burst", "flaky"), ("soft_budget", "gateway"), ("soft_budget", "team-a"),
                ("forecast_over_budget", "gateway")} <= subjects
        # The Slack destination got the same alerts, as {"text": ...} only.
        wait_until(lambda: len(receiver.texts("/slack/" + SECRET)) == len(first), 10, "the slack bodies")
        assert all(set(b) == {"text"} for p, b in receiver.bodies if p == "/slack/" + SECRET)

        passes = alerter.passes
        wait_until(lambda: alerter.passes >= passes + 5, 10, "five more evaluations")
        assert sorted(receiver.rules("/json/" + SECRET)) == sorted(first)      # within the cooldown: nothing again
        later = now + 61
        alerter.clock = lambda: later       # past the cooldown, the same ledger: each fires once more
        wait_until(lambda: len(receiver.rules("/json/" + SECRET)) >= 2 * len(first), 20, "the second round")
        passes = alerter.passes
        wait_until(lambda: alerter.passes >= passes + 5, 10, "five more evaluations")
        assert sorted(receiver.rules("/json/" + SECRET)) == sorted(first * 2)

        metrics = httpx.get(gw.url + "/metrics").text
        assert 'prefixgate_alert_deliveries_total{destination="' + receiver.url + '/…",outcome="delivered",rule="soft_budget"}' in metrics
        listed = httpx.get(gw.url + "/api/alerts/rules").json()
        assert {r["rule"] for r in listed["rules"] if r["last_fired"]} == expected
        forecast = httpx.get(gw.url + "/api/forecast").json()
        assert forecast["gateway"]["hard_usd"] == 0.01 and forecast["gateway"]["soft_usd"] == 0.005
        assert forecast["gateway"]["forecast_over"] and "run rate" in forecast["method"]
    assert SECRET not in caplog.text and SECRET not in metrics and SECRET not in json.dumps(listed)
    assert f"to {receiver.url}/…" in caplog.text        # each outcome is logged, host only
    # `prefixgate alerts list` reads the last firings from the ledger file.
    out = CliRunner().invoke(main, ["alerts", "list", "--ledger", settings.ledger_path],
                             env={"PREFIXGATE_LEDGER_PATH": settings.ledger_path})
    assert out.exit_code == 0, out.output
    assert "error_burst" in out.output and "last fired" in out.output and "on flaky" in out.output


def test_alerts_test_reaches_every_destination_and_names_a_dead_one(tmp_path, receiver):
    dead = f"http://127.0.0.1:{free_port()}/hooks/{SECRET}"
    (tmp_path / "policy.yaml").write_text(json.dumps({
        "routes": [{"name": "all", "models": ["*"], "targets": [{"upstream": "anthropic"}]}],
        "alert_webhooks": [f"{receiver.url}/json/{SECRET}"],
        "alerts": {"delivery_attempts": 2, "delivery_backoff_s": 0.05}}))
    env = {"PREFIXGATE_POLICY_FILE": str(tmp_path / "policy.yaml"), "PREFIXGATE_ALERT_WEBHOOKS": f"{receiver.url}/slack/x"}
    ok = CliRunner().invoke(main, ["alerts", "test"], env=env)
    assert ok.exit_code == 0, ok.output
    assert receiver.rules("/json/" + SECRET) == ["test"] and len(receiver.texts("/slack/x")) == 1
    failed = CliRunner().invoke(main, ["alerts", "test"], env={**env, "PREFIXGATE_ALERT_WEBHOOKS": f"{receiver.url}/slack/x,{dead}"})
    assert failed.exit_code == 1
    port = dead.split(":")[2].split("/")[0]
    assert f"#2 http://127.0.0.1:{port}/…" in failed.output and "1 of 3 destination(s)" in failed.output
    assert "cannot connect" in failed.output and "after 2 attempt(s)" in failed.output and SECRET not in failed.output
    assert len(receiver.rules("/json/" + SECRET)) == 2          # the live ones still got theirs


def test_a_hanging_or_refusing_receiver_never_holds_a_request(tmp_path, monkeypatch, receiver):
    receiver.hold = True        # takes the alert and never answers until released
    refused = f"http://127.0.0.1:{free_port()}/hook"
    with running_upstream() as up:
        policy = {**POLICY, "alert_webhooks": [f"{receiver.url}/hang", refused], "budget": {"usd": 0.0001, "warn_at": 0.5},
                  "alerts": {**POLICY["alerts"], "cooldown_s": 0, "delivery_timeout_s": 600}}
        app, settings = _gateway_app(tmp_path, monkeypatch, up.url, policy)
        with ServerThread(app) as gw:
            client = anthropic.Anthropic(api_key=os.environ["PG_TEST_ALERT_KEY"], base_url=gw.url, max_retries=0)
            client.messages.create(model=MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}])
            # The gateway's budget is spent: soft_budget fires on every pass (no cooldown), and its first delivery
            # is now held open by the receiver, the other refused.
            wait_until(lambda: receiver.holding >= 1, 20, "a delivery held open by the receiver")
            metrics = lambda: httpx.get(gw.url + "/metrics").text  # noqa: E731
            wait_until(lambda: 'outcome="failed"' in metrics(), 20, "the refused destination counted as failed")
            answers = [client.messages.with_raw_response.create(model=MODEL, max_tokens=16,
                                                               messages=[{"role": "user", "content": f"question {i}"}])
                       for i in range(20)]
            assert all(a.status_code == 200 for a in answers)
            assert receiver.holding >= 1 and not receiver.release.is_set()    # still held open all along
            ids = {a.headers["x-prefixgate-request-id"] for a in answers}
            wait_until(lambda: ids <= {r["id"] for r in read_records(settings.ledger_path)}, 10, "every record")
            assert len(read_records(settings.ledger_path)) == 21
            # The held destination's queue fills while it hangs: alerts past it are dropped and counted, not queued.
            wait_until(lambda: 'outcome="dropped"' in metrics(), 30, "dropped alerts counted")
            receiver.release.set()


@pytest.mark.parametrize(("extra", "message"), [
    ({"alert_webhooks": [f"ftp://example.com/{SECRET}"]}, "alert_webhooks.0: an http(s) URL is required"),
    ({"alert_webhooks": [{"url": "https://example.com/h", "format": "teams"}]}, "alert_webhooks.0.format: must be json or slack"),
    ({"alerts": {"cooldown": 5}}, "alerts.cooldown: unknown key"),
    ({"alerts": {"error_share": 3}}, "error_share are shares"),
    ({"budget": {"usd": 10, "warn_at": 1.5}}, "budget.warn_at: a share of usd"),
    ({"keys": [{"name": "k", "key_sha256": "0" * 64, "budget": {"usd": 5, "warn_at": 0}}]}, "keys.0.budget.warn_at"),
    ({"routes": [{"name": "r", "models": ["*"], "targets": [{"upstream": "anthropic"}], "diagnostics": "sometimes"}]},
     "routes.0.diagnostics: must be on or off"),
    ({"routes": [{"name": "r", "models": ["*"], "targets": [{"upstream": "anthropic"}], "diagnostics_per_minute": 0}]},
     "routes.0.diagnostics_per_minute: must be a positive integer"),
])
def test_bad_alerting_policy_names_the_key_and_never_the_secret(tmp_path, extra, message):
    settings = settings_for("http://127.0.0.1:9", tmp_path)
    with pytest.raises(PolicyError) as e:
        policy_for(settings, {"routes": [{"name": "all", "models": ["*"], "targets": [{"upstream": "anthropic"}]}], **extra})
    assert message in str(e.value) and SECRET not in str(e.value)


def test_a_model_in_use_retiring_soon_fires_and_one_without_a_date_never(tmp_path):
    """The retirement rule reads the catalogue's `retires` date where a row has one (a date, or its ISO text in a
    providers file); rows without one (this catalogue's, before retirement dates) are skipped cleanly."""
    from dataclasses import make_dataclass, replace

    from prefixgate.gateway.dashboard.alert_rules import _retiring, retires_on
    from prefixgate.policies.alerting import AlertSettings
    from prefixgate.providers.rules import default_catalog

    catalog = default_catalog()
    row = catalog.models[("anthropic", MODEL)]
    assert retires_on(catalog, "anthropic", "no-such-model") is None
    now = datetime(2026, 11, 27, 12, tzinfo=UTC).timestamp()
    if not CATALOGUE_RETIRES:
        assert retires_on(catalog, "anthropic", MODEL) is None
        assert _retiring({("anthropic", MODEL)}, catalog, AlertSettings(), now) == []
    # A row that carries a date (the shape the catalogue's rows take with retirement dates).
    Dated = make_dataclass("Dated", [("retires", object, None)], bases=(type(row),), frozen=True)
    for when in ("2026-12-07", datetime(2026, 12, 7).date()):
        dated = (replace(row, retires=when) if CATALOGUE_RETIRES
                 else Dated(**{f.name: getattr(row, f.name) for f in fields(type(row))}, retires=when))
        with_date = replace(catalog, models={**catalog.models, ("anthropic", MODEL): dated}, _names={})
        alerts = _retiring({("anthropic", MODEL)}, with_date, AlertSettings(retiring_within_days=30), now)
        assert [(a.rule, a.subject, a.details["retires"]) for a in alerts] == [("model_retiring", MODEL, "2026-12-07")]
        assert "10 days" in alerts[0].text
        assert _retiring({("anthropic", MODEL)}, with_date, AlertSettings(retiring_within_days=5), now) == []
