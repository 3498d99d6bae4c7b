"""What a Google upstream's error (Gemini API, Vertex AI) tells a Gemini caller: its `status` and `details`.

Google's error is the google.rpc.Status shape: `{"error": {"code", "message", "status", "details": [...]}}`, the
details typed messages (`@type`) a client branches on: RetryInfo (how long to wait), ErrorInfo (`reason`:
API_KEY_INVALID, SERVICE_DISABLED...), BadRequest field violations, QuotaFailure, Help links. A Gemini caller gets
them as sent, less what describes the gateway's own Google account rather than the request: the project is the
gateway's, not the tenant's, so ErrorInfo's `metadata.consumer` (`projects/NUMBER`) and `containerInfo` (the
number alone) are dropped and any
`projects/NUMBER` or `project=NUMBER` (SERVICE_DISABLED's activation URL and message), `project/ID` (console
links), `project:ID` (a QuotaFailure subject) reads `projects/-` (`project/-`, ...), a service account's address
(it names the project) `***`; an API
key (in a `key=` query or anywhere) is scrubbed as every upstream error message is (docs/security.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from prefixgate.errors import RequestError

# A project named in a resource path, console link or query (an id or a number), a QuotaFailure subject
# ("project:ID"), by number in prose ("in project 1234"), or by id after "resource project" (CONSUMER_INVALID).
_PROJECT = re.compile(r"\b(projects?/|project[=:])[^/\s\"'?&#]+|\b(project )\d+\b"
                      r"|\b(resource project )[a-z][a-z0-9-]{4,28}[a-z0-9]\b")
# A service account's address names its project (a service agent's, service-NUMBER@gcp-sa-..., its number).
_SERVICE_ACCOUNT = re.compile(r"[\w.+-]+@[\w.-]*gserviceaccount\.com\b")
_KEY_QUERY = re.compile(r"([?&]key=)[^&#\s\"]+")
# The project a Vertex request's path names: the gateway's, echoed in any wording Google picks ("Project `ID` is
# not allowed to use Publisher Model"), so it is scrubbed as a secret is, wherever it appears.
_PATH_PROJECT = re.compile(r"/projects/([^/?#]+)/")
# ErrorInfo.metadata keys that name the gateway's Google account.
_ACCOUNT_KEYS = frozenset({"consumer", "containerInfo"})


def google_error(raw: bytes) -> dict | None:
    """The `error` object of a Google-shaped error body (it names a `status`), else None."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return error_of(body) if isinstance(body, dict) else None


def error_of(body: dict) -> dict | None:
    """The `error` object of a parsed Google-shaped error (a whole body, or a stream's event), else None."""
    err = body.get("error")
    return err if isinstance(err, dict) and isinstance(err.get("status"), str) else None


def path_project(url: str) -> str | None:
    """The project `url`'s path names (a Vertex AI request's), else None."""
    found = _PATH_PROJECT.search(url)
    return found.group(1) if found else None


def without_account(text: str, scrub: Callable[[str], str]) -> str:
    """`text` with the gateway's project and keys taken out (`scrub` takes out the known secrets)."""
    text = _SERVICE_ACCOUNT.sub("***", _KEY_QUERY.sub(r"\1***", scrub(text)))
    return _PROJECT.sub(lambda m: (m.group(1) or m.group(2) or m.group(3)) + "-", text)


def caller_details(err: dict, scrub: Callable[[str], str]) -> list | None:
    """Google's `details` list as a Gemini caller may see it, or None when it sent none."""
    details = err.get("details")
    if not isinstance(details, list) or not details:
        return None
    return [_cleaned(d, scrub) for d in details]


def _cleaned(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, dict):
        return {k: _cleaned(v, scrub) for k, v in value.items() if k not in _ACCOUNT_KEYS}
    if isinstance(value, list):
        return [_cleaned(v, scrub) for v in value]
    return without_account(value, scrub) if isinstance(value, str) else value


def caller_error(err: dict, scrub: Callable[[str], str]) -> RequestError:
    """Google's `error` object (one reported mid-stream) as a Gemini caller gets it: its code, `status` and
    `details`, less the gateway's account."""
    code = err.get("code")
    return RequestError(without_account(str(err.get("message", "")), scrub), kind="server",
                        status=code if isinstance(code, int) and 400 <= code < 600 else 502,
                        rpc_status=err["status"], details=caller_details(err, scrub))
