"""AWS Signature Version 4 for Bedrock, with botocore: signing the gateway's upstream requests, and
verifying callers' signatures (the mock providers, as Bedrock does).

Credentials come from botocore's standard chain (environment, shared profile, container and instance roles);
role credentials refresh themselves before they expire, so each request takes a fresh frozen copy. A signature
covers the exact bytes sent, so the gateway signs last, after any rewrite of the body. Secrets never leave
this module: errors name the access key id at most.
"""

from __future__ import annotations

import hmac
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials

SERVICE = "bedrock"
# Headers that a hop may add or change; botocore leaves the same ones out of a signature.
_UNSIGNED = {"authorization", "connection", "content-length", "user-agent", "expect", "x-amzn-trace-id",
             "accept-encoding", "transfer-encoding"}
_AUTH = re.compile(r"AWS4-HMAC-SHA256\s+Credential=(?P<cred>[^,\s]+),\s*SignedHeaders=(?P<signed>[^,\s]+),"
                   r"\s*Signature=(?P<sig>[0-9a-f]{64})$")
# Bedrock, like every AWS service, refuses a request whose timestamp is more than 5 minutes off.
MAX_SKEW = timedelta(minutes=5)


def aws_region() -> str:
    """The region from the environment, as the AWS SDKs read it."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


class CredentialsError(RuntimeError):
    """No AWS credentials in the standard chain (the message says where they are looked for)."""


class SignatureError(PermissionError):
    """A request whose SigV4 signature does not verify; the message is safe to send back."""


class CredentialChain:
    """The standard AWS credential chain, resolved once; refreshable (role) credentials renew themselves."""

    def __init__(self, credentials: Credentials | None = None) -> None:
        self._credentials = credentials

    def current(self) -> ReadOnlyCredentials:
        if self._credentials is None:
            import botocore.session

            self._credentials = botocore.session.get_session().get_credentials()
            if self._credentials is None:
                raise CredentialsError("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                                       "AWS_PROFILE, or run with a container or instance role")
        return self._credentials.get_frozen_credentials()


def sign(method: str, url: str, headers: dict[str, str], body: bytes, credentials: ReadOnlyCredentials,
         region: str, service: str = SERVICE) -> dict[str, str]:
    """`headers` plus the SigV4 ones (authorization, x-amz-date, x-amz-security-token) for this exact request."""
    request = AWSRequest(method=method, url=url, data=body,
                         headers={k: v for k, v in headers.items() if k.lower() not in _UNSIGNED})
    SigV4Auth(Credentials(credentials.access_key, credentials.secret_key, credentials.token), service,
              region).add_auth(request)
    return {**headers, **dict(request.headers.items())}


@dataclass(frozen=True)
class SignedBy:
    access_key: str
    region: str
    service: str


def verify(method: str, url: str, headers: dict[str, str], body: bytes, secrets: dict[str, str],
           now: datetime | None = None) -> SignedBy:
    """Check a SigV4-signed request against `secrets` (access key id -> secret key), as AWS does.

    `url` must carry the path exactly as sent (percent-encoding included), since the signature covers it.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    match = _AUTH.match(lower.get("authorization", "").strip())
    if match is None:
        raise SignatureError("Authorization header requires a SigV4 signature (AWS4-HMAC-SHA256 Credential=..., "
                             "SignedHeaders=..., Signature=...)")
    access_key, date, region, service, terminal = (match["cred"].split("/") + ["", "", "", ""])[:5]
    if terminal != "aws4_request" or access_key not in secrets:
        raise SignatureError("The security token included in the request is invalid.")
    stamp = lower.get("x-amz-date", "")
    try:
        when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SignatureError("x-amz-date header is missing or not in the form YYYYMMDDTHHMMSSZ") from None
    if stamp[:8] != date:
        raise SignatureError("Credential date does not match x-amz-date")
    if abs((now or datetime.now(UTC)) - when) > MAX_SKEW:
        raise SignatureError("Signature expired: the request time is more than 5 minutes from the server time")
    signed = match["signed"].split(";")
    missing = [h for h in signed if h not in lower]
    if missing or "host" not in signed:
        raise SignatureError(f"signed headers missing from the request: {', '.join(missing) or 'host'}")
    request = AWSRequest(method=method, url=url, data=body, headers={h: lower[h] for h in signed})
    request.context["timestamp"] = stamp
    auth = SigV4Auth(Credentials(access_key, secrets[access_key], lower.get("x-amz-security-token")), service,
                     region)
    expected = auth.signature(auth.string_to_sign(request, auth.canonical_request(request)), request)
    if not hmac.compare_digest(expected, match["sig"]):
        raise SignatureError("The request signature we calculated does not match the signature you provided.")
    return SignedBy(access_key, region, service)
