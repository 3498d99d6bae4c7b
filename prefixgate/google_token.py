"""The gateway's Google OAuth2 access token for Vertex AI, from google-auth's application default credentials.

`google.auth.default()` finds the credentials the way every Google client does: the service-account or
authorized-user file named by GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default login, or the
metadata server of a Google Cloud VM. They are resolved once per gateway process and refreshed before they
expire (google-auth's `valid` is false a few minutes ahead of expiry), one refresh at a time, in a worker
thread: a refresh is an HTTP call and the metadata probe can take seconds, neither may block the event loop.
The token is only ever put in an Authorization header; no error, log line or ledger record carries it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
# After a failed lookup (no credentials anywhere), requests fail fast for this long before it is tried again.
RETRY_AFTER_S = 30.0


class GoogleAuthError(RuntimeError):
    """No usable Google credentials; the message says where they are looked for, never a secret."""


class GoogleToken:
    """One process's Google credentials and their current access token."""

    def __init__(self, credentials: Any = None) -> None:
        self._credentials = credentials
        self._lock: asyncio.Lock | None = None
        self._failed: tuple[float, str] | None = None
        self.refreshes = 0

    async def token(self, *, force: bool = False) -> str:
        """A valid access token; `force` refreshes even one google-auth still deems valid (Vertex said 401)."""
        creds = self._credentials
        if not force and creds is not None and creds.valid and creds.token:
            return str(creds.token)
        if self._lock is None:
            self._lock = asyncio.Lock()
        stale = creds.token if creds is not None else None
        async with self._lock:
            creds = self._credentials
            # Another request refreshed while this one waited: its token is the fresh one.
            if creds is not None and creds.valid and creds.token and (not force or creds.token != stale):
                return str(creds.token)
            return await asyncio.to_thread(self._refresh)

    def _refresh(self) -> str:
        import google.auth
        import google.auth.exceptions
        from google.auth.transport.requests import Request

        if self._failed is not None and time.monotonic() < self._failed[0]:
            raise GoogleAuthError(self._failed[1])
        try:
            if self._credentials is None:
                self._credentials, _ = google.auth.default(scopes=list(SCOPES))
            self._credentials.refresh(Request())
        except google.auth.exceptions.GoogleAuthError as e:
            message = ("no Google credentials for Vertex AI on the gateway: set PREFIXGATE_VERTEX_ACCESS_TOKEN, "
                       "GOOGLE_APPLICATION_CREDENTIALS (a service-account file), or run `gcloud auth "
                       f"application-default login` ({type(e).__name__})")
            self._failed = (time.monotonic() + RETRY_AFTER_S, message)
            raise GoogleAuthError(message) from None
        self._failed = None
        self.refreshes += 1
        return str(self._credentials.token)
