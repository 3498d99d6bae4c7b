"""The adapter interface: everything that differs between one wire format and another.

A wire format (OpenAI Chat Completions, Anthropic Messages, Gemini generateContent, ...) is one
`WireFormat` subclass in its own module of this package, registered by one line in `__init__.py`.
The gateway, the SDK wrapper, replay and lint hold a `WireFormat` and never branch on its name, so
adding a format is that module, that line and its tests (ARCHITECTURE.md, "Adding a wire format").

What a format decides, grouped as the request meets it:

- ingress: which gateway paths it serves (`parser_for`), which caller headers mean something to the
  same provider (`forward_headers`), how a stream is answered (`streams_json_array`);
- the IR: `parse_request` / `encode_request` (byte-faithful round trip), usage (`usage_of`,
  `stream_usage`), whole answers and streams of its own (`build_response`, `stream_events`, `error_event`);
- translation through the neutral forms of `neutral.py`: requests (`read_chat` / `write_chat`), answers
  (`read_reply` / `write_reply`), streams (`read_deltas` / `stream_writer`);
- relaying its streams: the framing of events (`framing`), cheap byte marks for events that may carry
  usage (`usage_marks`) or end the stream (`terminal`);
- upstream: the URL (`upstream_url`, `resource_url`), credentials (`auth_headers`), fixed headers
  (`upstream_headers`), and request signing for providers that sign each request (`signs`, `sign`,
  `reauthenticate`: AWS SigV4, Google OAuth).

Everything has one implementation; a format overrides only what it does differently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

from prefixgate.dialects import tagging
from prefixgate.dialects.diagnosis import MissDiagnosis
from prefixgate.dialects.neutral import Chat, Reply, StreamWriter
from prefixgate.dialects.sse import SSE_FRAMING, Framing
from prefixgate.errors import RequestError, error_body, status_named
from prefixgate.ir import Conversation
from prefixgate.usage import Usage

Parse = Callable[[bytes], Conversation]


class WireFormat:
    # ---- identity -----------------------------------------------------------------------------------
    name: ClassVar[str]                        # the registry key, the ledger's `dialect`, error shapes
    planner_provider: ClassVar[str]            # whose caching rules the planner applies (cache_planner.Target)
    span_name: ClassVar[str]                   # the OpenTelemetry server span's name for a model request

    # ---- ingress --------------------------------------------------------------------------------------
    forward_headers: ClassVar[tuple[str, ...]] = ()   # caller headers passed to an upstream of this format
    model_in_body: ClassVar[bool] = True               # False: the model is in the URL (Gemini, Bedrock)

    def parser_for(self, path: str) -> Parse | None:
        """The body parser when `path` is a model request of this format, else None."""
        return None

    def owns_path(self, path: str) -> bool:
        """Whether an error on `path` is answered in this format's error shape."""
        return False

    def streams_json_array(self, query: Mapping[str, str]) -> bool:
        """Whether a stream is answered as one JSON array of chunks rather than server-sent events."""
        return False

    def caller_wants_usage(self, conv: Conversation) -> bool:
        """Whether a streaming caller asked for the usage event (some formats send it only when asked)."""
        return True

    # ---- the IR ---------------------------------------------------------------------------------------
    def parse_request(self, body: bytes | str | dict, *, model: str | None = None) -> Conversation:
        raise NotImplementedError

    def encode_request(self, conv: Conversation) -> dict:
        raise NotImplementedError

    def billable(self, conv: Conversation) -> Conversation:
        """`conv` as sent upstream: what it takes for the answer to report usage (a stream must be billed)."""
        return conv

    mark_field: ClassVar[str] = ""      # a cache mark's field in the JSON, where callers mark blocks (Claude's)

    def marks_within(self, native: Any) -> list[str]:
        """The TTLs of the cache marks nested inside a block's native JSON (a tool result's own content blocks may
        carry them; a mark on the block itself is its checkpoint): each writes the prompt through that block. A
        mark whose TTL cannot be read is ""."""
        if not self.mark_field or not isinstance(native, dict | list):
            return []
        if isinstance(native, dict) and not any(isinstance(v, dict | list) for v in native.values()):
            return []       # a flat block (most are): nothing nested
        return list(_nested_ttls(native, self.mark_field, own=True))

    def automatic_ttl(self, conv: Conversation) -> str | None:
        """The TTL of a top-level automatic cache marker, which writes the whole prompt; None without one."""
        return None

    def usage_of(self, body: dict, conv: Conversation | None = None) -> Usage:
        """Usage of a whole answer to `conv` (the request can set how written tokens are priced)."""
        raise NotImplementedError

    def has_usage(self, body: dict) -> bool:
        raise NotImplementedError

    def stream_usage(self, conv: Conversation | None = None) -> Any:
        """A fresh accumulator: `.feed(event_json)` per event, `.usage` (None until reported)."""
        raise NotImplementedError

    def build_response(self, model: str, text: str, usage: Usage, *, finish_reason: str | None = None,
                       id: str | None = None) -> dict:
        raise NotImplementedError

    # Keep-alive may upgrade an idle session through the answer it got (`cache_planner.keepalive.upgrade_body`):
    # only where the answer can be sent back exactly as the caller will send it, collected by `reply_collector()`
    # (`.whole(body)` or `.feed(event)` per streamed event, then `.content()`: the blocks, or None).
    resends_replies: ClassVar[bool] = False

    def reply_collector(self) -> Any:
        raise NotImplementedError

    # What `stored_id`s are to the ownership registry (`gateway/ownership.py`): each kind has its own ids.
    stored_kind: ClassVar[str] = "response"

    def stored_id(self, body: dict) -> str | None:
        """The id a later request may name to reach this answer again (a stored Responses API response),
        from a whole answer or a stream's terminal event; None for formats without server-side state."""
        return None

    def chained_id(self, conv: Conversation) -> str | None:
        """The stored answer `conv` continues (a Responses `previous_response_id`, an Interactions
        `previous_interaction_id`): the earlier turns live at the upstream that holds it."""
        return None

    def chain_not_found(self, chained: str) -> RequestError:
        """The provider's refusal of a request continuing a stored answer it does not hold: the gateway's for one
        the caller's tenant may not continue, so that another tenant's id reads as nobody's, and the caller's SDK
        (and its recovery: Codex resends the whole input) sees what the provider would say."""
        return RequestError(f"Previous {self.stored_kind} with id '{chained}' not found.", status=404, kind="not_found")

    # The provider's own miss diagnostics in this format's fields (dialects/diagnosis.py); None: it has none.
    miss_diagnosis: ClassVar[MissDiagnosis | None] = None

    def tag_prompt(self, payload: dict, tag: str) -> None:
        """Start the encoded request `payload`'s cache prefix with `tag` (a tenant's: gateway/isolation.py), in
        the block the provider caches first; new objects replace changed ones (dialects/tagging.py)."""
        tagging.system_message(payload, tag)

    def error_body(self, err: RequestError) -> dict:
        """The error JSON this format's SDK parses into its own exception."""
        return error_body(err, self.name)

    def error_event(self, err: RequestError) -> bytes:
        """A mid-stream error in this format, so the caller's SDK raises instead of truncating silently."""
        raise NotImplementedError

    def stream_error(self, event: dict) -> str | None:
        """The message of an event that reports an error mid-stream, else None."""
        err = event.get("error")
        return str(err.get("message", "stream error")) if isinstance(err, dict) else None

    def stream_error_status(self, event: dict) -> int | None:
        """The HTTP status the error a mid-stream `event` reports stands for: Google's `code`, else the one its type
        or code is answered with (Anthropic's overloaded_error a 529); None when it names none."""
        err = event.get("error")
        if not isinstance(err, dict):
            return None
        code = err.get("code")
        if isinstance(code, int) and 400 <= code < 600:
            return code
        return status_named(err.get("type")) or status_named(code)

    def ends_stream(self, event: dict) -> bool:
        """Whether a parsed event ends the stream (besides `terminal`)."""
        return False

    def relays(self, event: dict, include_usage: bool) -> bool:
        """Whether a same-format event goes on to the caller (False withholds what it did not ask for)."""
        return True

    # ---- translation ----------------------------------------------------------------------------------
    finish_from: ClassVar[dict[str, str]]      # native finish reason -> neutral
    finish_to: ClassVar[dict[str, str]]        # neutral -> native
    # Native finish reasons of an answer that ended by itself, tool calls included: what a response cache may
    # replay. Anything else (cut short, filtered, paused, failed, a reason this code does not know) is not.
    natural_finishes: ClassVar[tuple[str, ...]] = ()

    def adopt(self, conv: Conversation, headers: Mapping[str, str]) -> Conversation | None:
        """`conv`, parsed in another format that carries the same body (Bedrock's InvokeModel carries
        Anthropic's), rewritten into this one without the lossy trip through `Chat`; None when there is
        no such sibling and translation must do."""
        return None

    def read_chat(self, body: dict) -> Chat:
        raise NotImplementedError

    def write_chat(self, chat: Chat, model: str) -> dict:
        raise NotImplementedError

    def read_reply(self, body: dict) -> Reply:
        raise NotImplementedError

    def write_reply(self, reply: Reply, model: str) -> dict:
        raise NotImplementedError

    def write_kept_reply(self, reply: Reply, model: str) -> dict:
        """`write_reply` for the response cache's replay of a stored answer: under `reply.id` where a later
        request reaches an answer by its id (`stored_id`: a Responses response, an interaction, both named by
        their top-level `id`); elsewhere the fresh id `write_reply` gives."""
        body = self.write_reply(reply, model)
        return {**body, "id": reply.id} if reply.id and self.stored_id(body) else body

    def read_deltas(self, event: dict) -> list:
        raise NotImplementedError

    writer: ClassVar[type[StreamWriter]]       # this format's events for neutral deltas

    def stream_writer(self, model: str, include_usage: bool = True) -> StreamWriter:
        return self.writer(model, include_usage)

    # ---- relaying streams -----------------------------------------------------------------------------
    # Most events pass through unparsed; these byte tests on the raw event pick the ones to parse. A framing
    # whose raw bytes do not show the JSON (AWS event-stream: base64 in binary frames) sets usage_marks to
    # (b"",), so every event is parsed, and terminal to None, ending the stream through `ends_stream`.
    framing: ClassVar[Framing] = SSE_FRAMING          # how events are delimited on the wire
    usage_marks: ClassVar[tuple[bytes, ...]] = ()     # bytes in every event that may carry usage
    terminal: ClassVar[bytes | None]                   # bytes only the stream's last event carries
    stored_mark: ClassVar[bytes | None] = None         # bytes of the first event naming a stored response

    def may_carry_usage(self, event: bytes) -> bool:
        """Whether the relay parses this raw event (the parsed event alone says what usage it holds)."""
        return any(m in event for m in self.usage_marks)

    # ---- upstream -------------------------------------------------------------------------------------
    upstream_headers: ClassVar[dict[str, str]] = {}   # sent on every upstream request (API version)
    explicit_cache_path: ClassVar[str | None] = None  # where a plan's `cache_create` is POSTed, if anywhere
    signs: ClassVar[bool] = False                     # True: `sign` runs on every upstream request

    def upstream_url(self, base_url: str, model: str, stream: bool) -> str:
        raise NotImplementedError

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"}

    def resource_url(self, base_url: str, path: str) -> str:
        """Where a pass-through call to `path` (`explicit_cache_path`, cachedContents, token counts) goes."""
        return f"{base_url}{path}"

    def explicit_cache_body(self, base_url: str, body: dict) -> dict:
        """A plan's `cache_create` as this provider takes it (Vertex names the model by its full resource name)."""
        return body

    def at_upstream(self, conv: Conversation, base_url: str) -> Conversation:
        """`conv` as the upstream at `base_url` takes it: resources it names in the caller's own view (a Vertex
        cache under the caller's project) named where they live. The caller's ownership was checked already."""
        return conv

    def error_reply(self, err: RequestError) -> tuple[int, dict, dict[str, str]]:
        """(status, JSON body, headers) of this format's error answer for `err` (Bedrock's statuses and its
        x-amzn-ErrorType header differ from the kind's usual status)."""
        return err.status, self.error_body(err), {}

    async def sign(self, method: str, url: str, headers: dict[str, str], body: bytes | None,
                   state: dict[str, Any]) -> dict[str, str]:
        """The headers to send, for a format whose provider authenticates each request by signing it
        (AWS SigV4 over method, URL, headers and body) or by a short-lived token (google-auth);
        called only when `signs` is set, after `auth_headers`, so a key-based format pays nothing.
        `state` belongs to the upstream client and lives as long as it: where a format keeps its
        credentials (resolved once per gateway process, refreshed as they expire), never in the format."""
        return headers

    async def reauthenticate(self, state: dict[str, Any]) -> bool:
        """After the provider refused the signing credentials (401): renew them in `state` and say whether
        the request is worth sending once more (a token can be revoked or expire early server-side)."""
        return False


def _nested_ttls(value: Any, field: str, own: bool = False) -> Iterator[str]:
    """The TTLs of `field` marks inside `value` (not its `own` top-level one); walks keys, never reads strings."""
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        if key == field and not own and isinstance(value, dict):
            ttl = item.get("ttl", "5m") if isinstance(item, dict) else ""
            yield ttl if isinstance(ttl, str) else ""
        elif key != field and isinstance(item, dict | list):
            yield from _nested_ttls(item, field)
