"""Whether a listen address is reachable only from this machine: the line between a safe default and an
exposure, for the gateway and the local backend alike."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True only for addresses this machine alone reaches; a host name may resolve anywhere, so it is not."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
