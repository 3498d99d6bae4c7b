"""A value the gateway hands a caller only to get it back unchanged (an upstream's opaque page cursor, which may
spell out the id it continues after: another tenant's), sealed so the caller can neither read nor alter it.

AES-256-GCM (`cryptography`) under a key derived from the server secret (`isolation.server_secret`, the same on
every replica, so any replica opens what another sealed), with a fresh random nonce per seal.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_NONCE = 12         # GCM's standard nonce; random per seal (far below the 2**32 seals one key may take)


def seal(secret: bytes, value: str) -> str:
    """`value` sealed, as URL-safe text."""
    nonce = secrets.token_bytes(_NONCE)
    sealed = nonce + AESGCM(_key(secret)).encrypt(nonce, value.encode(), None)
    return base64.urlsafe_b64encode(sealed).decode().rstrip("=")


def unseal(secret: bytes, sealed: str) -> str | None:
    """The value `seal` sealed into `sealed`; None for anything this gateway did not seal."""
    try:
        raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
        return AESGCM(_key(secret)).decrypt(raw[:_NONCE], raw[_NONCE:], None).decode()
    except (binascii.Error, ValueError, InvalidTag, UnicodeDecodeError):
        return None


def _key(secret: bytes) -> bytes:
    return hmac.new(secret, b"sealed:aes-256-gcm", hashlib.sha256).digest()
