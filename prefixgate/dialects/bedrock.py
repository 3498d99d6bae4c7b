"""What Bedrock's wire formats (InvokeModel, Converse) share: the operation paths, the error shape, the
binary event-stream framing of streams, SigV4 signing of upstream requests, and CountTokens' body (which
carries either format's request)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from prefixgate import sigv4
from prefixgate.dialects import eventstream
from prefixgate.dialects.validate import expect, load_body, require
from prefixgate.dialects.wire import Parse, WireFormat
from prefixgate.errors import RequestError
from prefixgate.ir import Conversation

# /model/{modelId}/{operation}; the model id is URL-quoted by the SDKs (an ARN's slashes as %2F).
_PATH = re.compile(r"^/model/(?P<model>.+)/(?P<op>invoke|invoke-with-response-stream|converse|converse-stream)$")
OPERATIONS = {"invoke": ("invoke", False), "invoke-with-response-stream": ("invoke", True),
              "converse": ("converse", False), "converse-stream": ("converse", True)}
# bedrock-runtime.us-east-1.amazonaws.com, or an interface VPC endpoint's
# vpce-0a1b-c2d3.bedrock-runtime.us-east-1.vpce.amazonaws.com: the region a request to AWS itself is signed for.
_AWS_HOST = re.compile(r"^(?:vpce-[a-z0-9-]+\.)?bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?$")

# RequestError kind -> (HTTP status, Bedrock exception name), as bedrock-runtime's service model lists them.
_EXCEPTIONS = {
    "invalid_request": (400, "ValidationException"),
    "too_large": (400, "ValidationException"),
    "authentication": (403, "UnrecognizedClientException"),
    "signature": (403, "InvalidSignatureException"),
    "permission": (403, "AccessDeniedException"),
    "not_found": (404, "ResourceNotFoundException"),
    "timeout": (408, "ModelTimeoutException"),
    "rate_limit": (429, "ThrottlingException"),
    "quota": (400, "ServiceQuotaExceededException"),    # botocore retries ThrottlingException; this it never does
    "overloaded": (503, "ServiceUnavailableException"),
    "server": (500, "InternalServerException"),
}
# Every exception bedrock-runtime's service model declares, with its HTTP status (botocore's `error.httpStatusCode`).
EXCEPTION_STATUS = {
    "AccessDeniedException": 403, "ConflictException": 400, "InternalServerException": 500,
    "ModelErrorException": 424, "ModelNotReadyException": 429, "ModelStreamErrorException": 424,
    "ModelTimeoutException": 408, "ResourceNotFoundException": 404, "ServiceQuotaExceededException": 400,
    "ServiceUnavailableException": 503, "ThrottlingException": 429, "ValidationException": 400,
}
# Statuses that name one exception whatever the failure's kind (a 408 is a model timeout, never a bad request).
_ONLY_EXCEPTION = {408: "ModelTimeoutException", 424: "ModelErrorException"}
# The exception events each stream may carry (the members of botocore's ResponseStream and ConverseStreamOutput),
# named in camelCase: boto3 finds an exception frame's class by that member name, and leaves a frame it cannot find
# as an EventStreamError with no code and no message.
_STREAM_EXCEPTIONS = {
    "invoke": {"internalServerException", "modelStreamErrorException", "validationException", "throttlingException",
               "modelTimeoutException", "serviceUnavailableException"},
    "converse": {"internalServerException", "modelStreamErrorException", "validationException", "throttlingException",
                 "serviceUnavailableException"},
}


@dataclass(frozen=True)
class Operation:
    model: str          # the model id as the caller named it (decoded)
    format: str         # "invoke" or "converse"
    stream: bool


# Where Bedrock Runtime's operations live (botocore's bedrock-runtime service model).
RUNTIME_PATHS = ("/model/", "/guardrail/", "/async-invoke")


def operation_of(path: str) -> Operation | None:
    """The Bedrock operation a request path names, or None when it is not one of them."""
    match = _PATH.match(path)
    if match is None:
        return None
    fmt, stream = OPERATIONS[match["op"]]
    return Operation(unquote(match["model"]), fmt, stream)


def counted_request(body: bytes | str | dict) -> tuple[str, dict]:
    """CountTokens' `input` (botocore's bedrock-runtime model): which operation's request it counts ("invoke" or
    "converse") and that request's body (InvokeModel's, a blob, comes base64-encoded as boto3 sends it)."""
    given = expect(require(load_body(body), "input", dict), dict, "input")
    kinds = [k for k in ("invokeModel", "converse") if k in given]
    if len(kinds) != 1:
        raise RequestError("input: expected exactly one of invokeModel, converse", field="input")
    if kinds[0] == "converse":
        return "converse", expect(given["converse"], dict, "input.converse")
    blob = require(expect(given["invokeModel"], dict, "input.invokeModel"), "body", str, "input.invokeModel.body")
    where = "input.invokeModel.body"
    try:
        decoded = base64.b64decode(blob, validate=True)
    except (ValueError, binascii.Error):
        raise RequestError(f"{where}: expected a base64-encoded JSON request body", field=where) from None
    try:    # a request body of its own, held to every body's checks (a key written twice, a lone surrogate)
        return "invoke", load_body(decoded)
    except RequestError as e:
        raise RequestError(f"{where}: {e.message}", field=f"{where}.{e.field}" if e.field else where) from None


def error_body(err: RequestError) -> tuple[int, dict, dict[str, str]]:
    """(status, JSON body, headers) of Bedrock's error for `err`; boto3 reads the type from x-amzn-ErrorType.

    An upstream Bedrock's own exception (its name in `err.code`) is passed on as it came, so boto3 raises the same
    class (ModelNotReadyException, ServiceQuotaExceededException, ...) as it would against AWS."""
    if err.code in EXCEPTION_STATUS:
        name, status = err.code, EXCEPTION_STATUS[err.code]
    elif err.status in _ONLY_EXCEPTION:
        status, name = err.status, _ONLY_EXCEPTION[err.status]
    else:
        status, name = _EXCEPTIONS.get(err.kind, _EXCEPTIONS["server"])
        if err.kind == "server":
            status = err.status   # 500, or the 502 of a broken upstream
    return status, {"message": err.message}, {"x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"}


def region_of(url: str) -> str:
    """The region to sign for: AWS's own host says it; elsewhere (a proxy, a test double) AWS_REGION."""
    match = _AWS_HOST.match(urlsplit(url).hostname or "")
    return match.group(1) if match else sigv4.aws_region()


class BedrockFormat(WireFormat):
    """Shared by InvokeModel and Converse: Claude's cache rules as Bedrock documents them, the model in the
    path, event-stream framing, Bedrock's error shape, and SigV4 on every upstream request (or a Bedrock
    API key as a bearer token, when the gateway has one in AWS_BEARER_TOKEN_BEDROCK)."""

    planner_provider = "bedrock"
    model_in_body = False
    forward_headers = ("x-amzn-bedrock-guardrailidentifier", "x-amzn-bedrock-guardrailversion",
                       "x-amzn-bedrock-trace", "x-amzn-bedrock-performanceconfig-latency",
                       "x-amzn-bedrock-service-tier")
    terminal = None
    signs = True

    operation: ClassVar[str]       # "invoke" or "converse": which of Bedrock's operations this format is

    def parser_for(self, path: str) -> Parse | None:
        op = operation_of(path)
        if op is None or op.format != self.operation:
            return None
        return lambda body: self.parse_path_body(body, op)

    def parse_path_body(self, body: bytes, op: Operation) -> Conversation:
        raise NotImplementedError

    def owns_path(self, path: str) -> bool:
        op = operation_of(path)
        if op is not None:
            return op.format == self.operation
        # Bedrock Runtime's other paths (CountTokens, guardrails, async invokes: not served here) answer in
        # Bedrock's shape too, so boto3 raises its own error. Both formats share that shape; InvokeModel claims them.
        return self.operation == "invoke" and path.startswith(RUNTIME_PATHS)

    def error_reply(self, err: RequestError) -> tuple[int, dict, dict[str, str]]:
        return error_body(err)

    def stream_error_status(self, event: dict) -> int | None:
        name = str((event.get("error") or {}).get("type", ""))   # an exception frame's member: throttlingException
        return EXCEPTION_STATUS.get(name[:1].upper() + name[1:]) or super().stream_error_status(event)

    def error_event(self, err: RequestError) -> bytes:
        _, _, headers = error_body(err)
        name = headers["x-amzn-errortype"].split(":")[0]
        member = name[0].lower() + name[1:]
        if member not in _STREAM_EXCEPTIONS[self.operation]:
            member = "internalServerException"
        return eventstream.exception(member, err.message)

    async def sign(self, method: str, url: str, headers: dict[str, str], body: bytes | None,
                   state: dict[str, Any]) -> dict[str, str]:
        if "authorization" in {k.lower() for k in headers}:
            return headers          # a Bedrock API key, sent as a bearer token
        chain = state.setdefault("aws", sigv4.CredentialChain())
        # Role credentials may refresh over the network: off the event loop.
        try:
            creds = await asyncio.to_thread(chain.current)
        except sigv4.CredentialsError as e:
            raise RequestError(f"no credentials for Bedrock on the gateway: {e}", status=401,
                               kind="authentication") from None
        return sigv4.sign(method, url, headers, body or b"", creds, region_of(url))
