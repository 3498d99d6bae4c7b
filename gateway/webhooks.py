"""Delivering alerts to webhooks, off the request path.

Each destination has its own worker thread and bounded queue, so a receiver that hangs or refuses delays only
its own later alerts: `send` never blocks (a full queue drops the alert, counted) and no request ever waits
on a delivery. An attempt that fails with a connection error, a timeout, 429 or 5xx is retried with
exponential backoff; other refusals (4xx: a dead or revoked hook) fail at once. Every outcome is logged and
counted in /metrics (`prefixgate_alert_deliveries_total`) under the destination's scheme and host only:
webhook URLs carry their secret in the path, so the URL itself is never logged (nor an httpx error's text,
which quotes it).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from prefixgate import __version__
from prefixgate.policies.alerting import AlertSettings, Destination

log = logging.getLogger("prefixgate.alerts")
QUEUE_SIZE = 100


@dataclass(frozen=True)
class Alert:
    rule: str                   # hit_rate_drop, caching_costs_more, ttl_expiry_share, soft_budget, ...
    subject: str                # the route, key, model, or "gateway" it is about
    text: str                   # one line a person reads
    ts: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """What a cooldown is per."""
        return f"{self.rule}:{self.subject}"

    def body(self, fmt: str) -> dict:
        """Slack's incoming-webhook body (`text`), or the structured one (which has `text` too: Slack shows it).
        `text` quotes caller-chosen names (routes, models, keys), so it is escaped as Slack asks (& < >): a route
        named `<!channel>` or `<http://evil|click>` is shown as written, never a mention or a link. The structured
        fields (subject, details) stay as they are."""
        text = "prefixgate: " + slack_escape(self.text)
        if fmt == "slack":
            return {"text": text}
        return {"text": text, "source": "prefixgate", "version": __version__, "rule": self.rule,
                "subject": self.subject, "ts": self.ts, "details": self.details}


def slack_escape(text: str) -> str:
    """Text as Slack's mrkdwn shows it literally (https://api.slack.com/reference/surfaces/formatting#escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class DeliveryFailed(Exception):
    """Why a delivery failed, in words safe to log (no URL)."""


def post(client: httpx.Client, dest: Destination, alert: Alert, settings: AlertSettings,
         wait: Callable[[float], bool] = lambda s: False) -> int:
    """Deliver `alert` to `dest`, retrying what may pass later; returns the attempts used. `wait(s)` sleeps between
    attempts and returns True when the sender is closing (then no more attempts)."""
    reason, attempt = "", 0
    for attempt in range(1, settings.delivery_attempts + 1):
        try:
            resp = client.post(dest.url, json=alert.body(dest.format), timeout=settings.delivery_timeout_s)
        except httpx.TimeoutException:
            reason = f"no answer within {settings.delivery_timeout_s:g}s"
        except httpx.HTTPError as e:
            reason = f"cannot connect ({type(e).__name__})"
        else:
            if resp.status_code < 300:
                return attempt
            reason = f"answered {resp.status_code}"
            if resp.status_code < 500 and resp.status_code != 429:
                raise DeliveryFailed(reason + " (not retried)")
        if attempt == settings.delivery_attempts or wait(settings.delivery_backoff_s * 2 ** (attempt - 1)):
            break
    raise DeliveryFailed(f"{reason} after {attempt} attempt(s)")


class Deliveries:
    def __init__(self, destinations: tuple[Destination, ...], settings: AlertSettings, counter: Any = None) -> None:
        self.settings = settings
        self.counter = counter      # prometheus Counter(destination, rule, outcome), or None
        self._stop = threading.Event()
        self._queues = {d: queue.Queue(QUEUE_SIZE) for d in destinations}
        self._threads = [threading.Thread(target=self._run, args=(d, q), name=f"prefixgate-alerts-{i}", daemon=True)
                         for i, (d, q) in enumerate(self._queues.items())]
        for t in self._threads:
            t.start()

    @property
    def destinations(self) -> tuple[Destination, ...]:
        return tuple(self._queues)

    def send(self, alert: Alert) -> None:
        """Queue `alert` for every destination; never blocks."""
        for dest, q in self._queues.items():
            try:
                q.put_nowait(alert)
            except queue.Full:
                self._outcome(dest, alert, "dropped", "its queue is full (the receiver is too slow)")

    def close(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        for q in self._queues.values():
            try:
                q.put_nowait(None)      # wakes a worker waiting for work; a busy one sees the stop flag
            except queue.Full:
                pass
        for t in self._threads:
            t.join(timeout_s)

    def _run(self, dest: Destination, q: queue.Queue) -> None:
        with httpx.Client(follow_redirects=False) as client:
            while not self._stop.is_set():
                alert = q.get()
                if alert is None:
                    return
                try:
                    attempts = post(client, dest, alert, self.settings, self._stop.wait)
                except DeliveryFailed as e:
                    self._outcome(dest, alert, "failed", str(e))
                else:
                    self._outcome(dest, alert, "delivered", f"{attempts} attempt(s)")

    def _outcome(self, dest: Destination, alert: Alert, outcome: str, how: str) -> None:
        if self.counter is not None:
            self.counter.labels(dest.shown, alert.rule, outcome).inc()
        level = logging.INFO if outcome == "delivered" else logging.WARNING
        log.log(level, "alert %s on %s %s to %s: %s", alert.rule, alert.subject, outcome, dest.shown, how)


def try_every(destinations: tuple[Destination, ...], settings: AlertSettings) -> dict[Destination, str | None]:
    """Send one test alert to each destination now: {destination: None if delivered, else why not}."""
    alert = Alert("test", "gateway", "test alert from `prefixgate alerts test`: this destination receives alerts",
                  time.time())
    out: dict[Destination, str | None] = {}
    with httpx.Client(follow_redirects=False) as client:
        for dest in destinations:
            try:
                post(client, dest, alert, settings, lambda s: time.sleep(s) or False)
                out[dest] = None
            except DeliveryFailed as e:
                out[dest] = str(e)
    return out
