"""Which listen addresses count as loopback (the gateway's and the backend's protected start): only
addresses this machine alone reaches. A name that merely starts or ends like one may resolve anywhere."""

from __future__ import annotations

import pytest

from prefixgate.bind import is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST", "localhost."])
def test_loopback_addresses_and_the_loopback_name(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", [
    "localhost.example.com", "localhost.localdomain.evil", "my-localhost", "localhostx", "0.0.0.0", "::",
    "192.168.1.10", "10.0.0.1", "example.com", "", "127.0.0.1.nip.io", "[::ffff:10.0.0.1]",
])
def test_names_and_addresses_others_can_reach_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)
