"""A value the gateway hands a caller only to get it back unchanged (an upstream's opaque page cursor, which may
spell out the id it continues after: another tenant's), sealed so the caller can neither read nor alter it.

HMAC-SHA256 under the server secret (`isolation.server_secret`, the same on every replica) is both the cipher's
keystream (counter mode, a fresh random nonce per seal) and the tag over nonce and ciphertext (encrypt, then
MAC), each under its own derived key. The standard library has no authenticated cipher, and the value is short.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

_NONCE, _TAG = 16, 16


def seal(secret: bytes, value: str) -> str:
    """`value` sealed, as URL-safe text."""
    nonce = secrets.token_bytes(_NONCE)
    data = value.encode()
    body = bytes(a ^ b for a, b in zip(data, _keystream(secret, nonce, len(data)), strict=True))
    return base64.urlsafe_b64encode(nonce + body + _tag(secret, nonce + body)).decode().rstrip("=")


def unseal(secret: bytes, sealed: str) -> str | None:
    """The value `seal` sealed into `sealed`; None for anything this gateway did not seal."""
    try:
        raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    except (binascii.Error, ValueError):
        return None
    nonce, body, tag = raw[:_NONCE], raw[_NONCE:-_TAG], raw[-_TAG:]
    if len(raw) < _NONCE + _TAG or not hmac.compare_digest(tag, _tag(secret, nonce + body)):
        return None
    data = bytes(a ^ b for a, b in zip(body, _keystream(secret, nonce, len(body)), strict=True))
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _key(secret: bytes, purpose: bytes) -> bytes:
    return hmac.new(secret, b"sealed:" + purpose, hashlib.sha256).digest()


def _keystream(secret: bytes, nonce: bytes, size: int) -> bytes:
    key = _key(secret, b"stream")
    blocks = (hmac.new(key, nonce + n.to_bytes(4, "big"), hashlib.sha256).digest() for n in range(-(-size // 32)))
    return b"".join(blocks)[:size]


def _tag(secret: bytes, message: bytes) -> bytes:
    return hmac.new(_key(secret, b"tag"), message, hashlib.sha256).digest()[:_TAG]
