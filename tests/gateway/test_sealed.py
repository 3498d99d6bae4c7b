"""Sealed values (`gateway/sealed.py`): what the gateway hands a caller only to get back, which the caller can
neither read nor alter, and which any replica sharing the server secret opens."""

from __future__ import annotations

import base64

from prefixgate.gateway.sealed import seal, unseal

SECRET, OTHER = b"server-secret-one", b"server-secret-two"
CURSOR = "page_ZmlsZV8wMTFhY21lUTNyZXBvcnQ"       # an upstream cursor spelling out another tenant's file id


def test_a_sealed_value_opens_with_its_secret_alone_and_reads_as_nothing() -> None:
    sealed = seal(SECRET, CURSOR)
    assert unseal(SECRET, sealed) == CURSOR
    assert CURSOR not in sealed and "ZmlsZV8wMTFhY21l" not in sealed
    assert base64.urlsafe_b64encode(CURSOR.encode()).decode().rstrip("=") not in sealed
    assert seal(SECRET, CURSOR) != sealed          # a fresh nonce each time: equal cursors do not look equal
    assert unseal(OTHER, sealed) is None


def test_an_altered_or_foreign_value_does_not_open() -> None:
    sealed = seal(SECRET, CURSOR)
    flipped = sealed[:20] + ("A" if sealed[20] != "A" else "B") + sealed[21:]
    for forged in (flipped, sealed[:-2], "", "not base64 at all!", CURSOR, base64.urlsafe_b64encode(b"x" * 40).decode()):
        assert unseal(SECRET, forged) is None
