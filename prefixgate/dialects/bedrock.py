"""What Bedrock's two wire formats (InvokeModel, Converse) share: the operation paths and the error shape."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from prefixgate.errors import RequestError

# /model/{modelId}/{operation}; the model id is URL-quoted by the SDKs (an ARN's slashes as %2F).
_PATH = re.compile(r"^/model/(?P<model>[^/]+(?:/[^/]+)*?)/(?P<op>invoke|invoke-with-response-stream|converse|"
                   r"converse-stream|count-tokens)$")
OPERATIONS = {"invoke": ("invoke", False), "invoke-with-response-stream": ("invoke", True),
              "converse": ("converse", False), "converse-stream": ("converse", True)}

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
    "overloaded": (503, "ServiceUnavailableException"),
    "server": (500, "InternalServerException"),
}


@dataclass(frozen=True)
class Operation:
    model: str          # the model id as the caller named it (decoded)
    format: str         # "invoke" or "converse"
    stream: bool


def operation_of(path: str) -> Operation | None:
    """The Bedrock operation a request path names, or None when it is not one of them."""
    match = _PATH.match(path)
    if match is None or match["op"] not in OPERATIONS:
        return None
    fmt, stream = OPERATIONS[match["op"]]
    return Operation(unquote(match["model"]), fmt, stream)


def error_body(err: RequestError) -> tuple[int, dict, dict[str, str]]:
    """(status, JSON body, headers) of Bedrock's error for `err`; boto3 reads the type from x-amzn-ErrorType."""
    status, name = _EXCEPTIONS.get(err.kind, _EXCEPTIONS["server"])
    if err.kind == "server":
        status = err.status   # 500, or the 502 of a broken upstream
    return status, {"message": err.message}, {"x-amzn-errortype": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
