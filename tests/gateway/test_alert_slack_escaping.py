"""An alert's text quotes caller-chosen names (a route hint, a model, a key name); Slack reads `<!channel>`,
`<!here>`, `<@U123>` and `<http://evil|click>` in it as mentions and links. The text is escaped as Slack asks
(& < > as entities) in both bodies, and the body that goes out is JSON built by an encoder."""

from __future__ import annotations

import json

import httpx

from prefixgate.gateway.webhooks import Alert, post
from prefixgate.policies.alerting import AlertSettings, Destination

ROUTE = 'r <!channel> <!here> <@U123> <http://evil|click> &amp; "q" \\ \n\U0001F600'


def test_caller_text_cannot_mention_or_link_in_slack_and_the_body_is_json():
    alert = Alert("error_burst", ROUTE, f"10 of 10 requests on route {ROUTE} failed", 1.0, {"route": ROUTE})
    sent: list[bytes] = []

    def hook(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200)

    with httpx.Client(transport=httpx.MockTransport(hook)) as client:
        for fmt in ("slack", "json"):
            post(client, Destination(url="https://hooks.slack.com/services/T/B/secret", format=fmt), alert, AlertSettings())
    slack, structured = (json.loads(b) for b in sent)
    for body in (slack, structured):
        assert "<" not in body["text"] and ">" not in body["text"]
        assert "&lt;!channel&gt; &lt;!here&gt; &lt;@U123&gt; &lt;http://evil|click&gt; &amp;amp;" in body["text"]
        assert body["text"].endswith('"q" \\ \n\U0001F600 failed')
    assert structured["subject"] == ROUTE and structured["details"] == {"route": ROUTE}    # data as it is
