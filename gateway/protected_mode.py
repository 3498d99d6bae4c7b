"""Protected mode at start-up: log what the gateway exposes, and refuse to start with an exposure nobody
accepted (Redis's protected mode, Jupyter's token rule). What counts as an exposure is `exposure.py`'s call."""

from __future__ import annotations

import logging

from prefixgate.config import ConfigError, Settings
from prefixgate.gateway.exposure import Summary, summarize
from prefixgate.policies import Policy

log = logging.getLogger("prefixgate.gateway")


class ExposureRefused(ConfigError):
    """A non-loopback bind with exposures and no `open_gateway`: the message names each and what closes it."""


def refusal(summary: Summary) -> str:
    lines = [f"refusing to serve on {summary.bind} (protected mode):"]
    lines += [f"  - {e.what}: close it with {e.closes}" for e in summary.exposures]
    lines.append("Or bind to 127.0.0.1 (host), or accept these exposures with open_gateway: true (--open).")
    return "\n".join(lines)


def guard(settings: Settings, policy: Policy) -> Summary:
    """The gateway's exposure summary, logged; raises ExposureRefused before anything listens."""
    summary = summarize(settings, policy)
    if summary.exposures and not settings.open_gateway:
        raise ExposureRefused(refusal(summary))
    log.info("exposure: %s", summary.line(), extra={"fields": {"exposure": summary.to_dict()}})
    # Accepted exposures are repeated at every start, so nobody inherits an open gateway unawares.
    for e in summary.exposures:
        log.warning("open_gateway: %s (close it with %s)", e.what, e.closes)
    return summary
