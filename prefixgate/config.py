"""Settings: a YAML file plus PREFIXGATE_* environment variables (environment wins), validated at the edge."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from prefixgate.yaml_file import YamlFileError, read_mapping


class ConfigError(Exception):
    """A config file or variable that cannot be used, with the offending key in the message."""


def unknown_key(key: str, known: Iterable[str]) -> str:
    """'unknown key', with the closest known keys when the key looks misspelt, else every known key."""
    known = sorted(known)
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {' or '.join(close)}?"
    return f"unknown key; known keys: {', '.join(known)}"


# Values people copy from examples and tutorials: refused as the admin token, and (as sha256) as caller keys.
SAMPLE_SECRETS = frozenset({"test", "secret", "password", "changeme", "change-me", "admin", "token", "example", "key",
                            "your-admin-token", "your-admin-token-here", "change-me-please", "replace-me",
                            "admin-token", "supersecret", "letmein", "0123456789abcdef"})
MIN_ADMIN_TOKEN = 16
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")


def scheme_of(url: Any) -> str:
    """What a refused URL is shown as: its scheme only, since the rest may hold a password (and a value with
    no scheme may be one)."""
    if not isinstance(url, str):
        return f"a {type(url).__name__}"
    scheme = url.split("://")[0] if "://" in url else ""
    return f"{scheme}://..." if scheme.isalnum() else "a value with no URL scheme"


class Settings(BaseSettings):
    # No setting takes an infinite or NaN number: `inf` would lift a timeout or a limit without saying so.
    model_config = SettingsConfigDict(env_prefix="PREFIXGATE_", extra="forbid", allow_inf_nan=False)

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    # Local backend: a model name ("smollm2-135m") run in-process, or "" for none.
    local_model: str = ""
    # An OpenAI-compatible server (this project's `prefixgate backend`, vLLM, SGLang) instead of in-process.
    backend_url: str = ""
    # Hosted providers' base URLs; point them at `prefixgate mock-providers` for offline work.
    anthropic_base_url: str = "https://api.anthropic.com"
    openai_base_url: str = "https://api.openai.com"
    gemini_base_url: str = "https://generativelanguage.googleapis.com"
    # Amazon Bedrock Runtime; {region} is filled from AWS_REGION (AWS_DEFAULT_REGION, else us-east-1).
    bedrock_base_url: str = "https://bedrock-runtime.{region}.amazonaws.com"
    # Vertex AI's host; empty: Google's own for the location (https://{location}-aiplatform.googleapis.com).
    vertex_base_url: str = ""
    # Ledger: SQLite file by default; with a Redis URL replicas share ledger and learned state.
    ledger_path: str = "prefixgate-ledger.sqlite"
    # Keep each request body in the ledger (for `prefixgate ledger export --trace`). Off: bodies are prompts.
    # A route's own `ledger_bodies` in the policy file overrides this (keep bodies for chosen routes only).
    ledger_bodies: bool = False
    redis_url: str = ""
    # Raw ledger records (and per-minute rollups) are pruned after this many days, hourly rollups after
    # ledger_rollup_retention_days: the dashboard shows long spans from those.
    # A PostgreSQL database every replica shares (postgresql://user:password@host/db): each copies its records
    # and rollups there and the dashboard shows the fleet. Empty: this replica's SQLite file only.
    ledger_url: str = ""
    ledger_retention_days: float = Field(30, gt=0)
    ledger_rollup_retention_days: float = Field(400, gt=0)
    # Routing policy YAML (upstreams, routes with fallbacks, caller keys with budgets); empty: each model
    # family goes to its own provider and the local model to the local backend.
    policy_file: str = ""
    # Largest request body the gateway accepts (images and PDFs travel inline, so this is generous).
    max_body_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    # Most messages (turns, Gemini contents, Responses input items) and content parts (text, image, tool call
    # and result blocks, all turns together) one request may carry: more answers 413 naming the limit. They bound
    # the gateway's work per request; providers accept fewer (docs/gateway.md#request-limits).
    max_messages: int = Field(100_000, ge=1)
    max_content_parts: int = Field(400_000, ge=1)
    # Largest file one `POST /v1/files` upload may carry, in MiB, below the provider's own cap (OpenAI 512,
    # Anthropic 500): the upload is streamed to the provider, never held whole.
    max_upload_mb: int = Field(512, ge=1)
    # A body of this many bytes or more is parsed, planned and encoded on a worker thread, off the event loop,
    # so it does not stall other requests (gateway/off_loop.py).
    off_loop_bytes: int = Field(1 << 20, ge=0)
    # Megabytes of recent request bodies kept per format (Anthropic, OpenAI Chat, Responses), so a resent
    # conversation is parsed and planned from where it differs (docs/gateway.md); they hold ~8x that with
    # their parsed values. 0 turns it off.
    resent_bodies_mb: int = Field(24, ge=0)
    # Longest lifetime a caller may give an explicit cache (Gemini/Vertex cachedContents `ttl`/`expireTime`): the
    # operator pays its storage by the hour. Longer asks are refused.
    max_cache_ttl_s: float = Field(86400, gt=0)
    # Seconds to wait for an upstream's connection; the wait for its first byte is per route (retry.timeout_s).
    connect_timeout_s: float = Field(10.0, gt=0)
    # How long a client may take to send a request's headers, and at most between two chunks of its body:
    # a slow client (slowloris) is let go, not held open.
    client_timeout_s: float = Field(15.0, gt=0)
    # Overrides merged over the packaged provider rules and prices.
    providers_file: str = ""
    log_level: str = "info"
    # Self-hosted upstreams (local, openai_compatible) get a per-tenant `cache_salt` on every request from a
    # keyed caller, replacing any the caller sent: tenants share no prefix-cache blocks (vLLM and this
    # project's backend accept the field; turn it off for a server that rejects unknown fields).
    tenant_cache_isolation: bool = True
    # The server secret tenants' cache salts and tags are derived from (gateway/isolation.py); empty: one drawn
    # once and kept in the ledger file (with Redis, shared by every replica).
    tenant_secret: str = ""
    # Web origins (https://app.example.com) whose pages may call the gateway from a browser; any other page's
    # requests (they carry an Origin header; SDKs and curl send none) are refused (gateway/browser_guard.py).
    # The variable takes them comma-separated (as alert_webhooks) or as a JSON list.
    cors_origins: Annotated[list[str], NoDecode] = []
    # Bearer token for /dashboard and /api/*; empty leaves them open (the gateway listens on localhost by default).
    admin_token: str = ""
    # Protected mode: on a non-loopback bind the gateway refuses to start with an exposure (an open relay of its
    # provider keys, an open dashboard; gateway/exposure.py) unless this is true; then each start logs a warning.
    open_gateway: bool = False
    # OpenTelemetry spans (gateway/tracing.py): auto traces when the process has a tracer provider (e.g. under
    # opentelemetry-instrument), on also sets up the SDK from OTEL_* variables, off never traces.
    otel: Literal["auto", "on", "off"] = "auto"
    # Webhook URLs (comma-separated) that alerts are pushed to, besides the policy's `alert_webhooks`
    # (docs/alerts.md). They carry secrets in their paths: the gateway logs only their hosts.
    alert_webhooks: str = ""
    # Tests only: a file holding seconds added to the clock keep-alive and mock-providers' caches run by
    # (prefixgate/clock.py), so an idle gap of minutes passes without waiting it out. Empty: the wall clock.
    clock_offset_file: str = ""

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origins_from_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value.lstrip().startswith("["):
                try:
                    return json.loads(value)
                except json.JSONDecodeError as e:
                    raise ValueError(f"not a JSON list of origins ({e.msg}); or give them comma-separated") from None
            return [origin.strip() for origin in value.split(",") if origin.strip()]
        return value

    @field_validator("admin_token", "tenant_secret")
    @classmethod
    def _strong_secret(cls, token: str, info: ValidationInfo) -> str:
        # The tenant secret too: tenants' cache salts and tags are HMACs under it, so `x` makes them guessable.
        if token and (len(token) < MIN_ADMIN_TOKEN or token.lower() in SAMPLE_SECRETS):
            raise ValueError(f"{info.field_name} must be at least {MIN_ADMIN_TOKEN} characters and not a sample value; "
                             "make one with: openssl rand -hex 24")
        return token

    @field_validator("anthropic_base_url", "openai_base_url", "gemini_base_url", "bedrock_base_url", "vertex_base_url",
                     "backend_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        # `localhost:8200` (no scheme) used to load, and every request to that upstream then failed.
        if url and not url.startswith(("http://", "https://")):
            raise ValueError(f"an http:// or https:// URL is required, got {scheme_of(url)}")
        return url

    @field_validator("alert_webhooks")
    @classmethod
    def _webhook_urls(cls, urls: str) -> str:
        # Checked here, before anything listens: the alerter reads them as the gateway starts, where a bad one
        # was a traceback. Each is shown by its scheme only: a webhook's path is its secret.
        for i, url in enumerate(u.strip() for u in urls.split(",") if u.strip()):
            split = urlsplit(url)
            if split.scheme not in ("http", "https") or not split.hostname:
                raise ValueError(f"URL #{i}: an http:// or https:// URL is required, got {scheme_of(url)}")
        return urls

    @field_validator("log_level")
    @classmethod
    def _known_level(cls, level: str) -> str:
        # An unknown level used to pass here and end `serve` in a logging traceback.
        if level.lower() not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        return level.lower()

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, url: str) -> str:
        if url and not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"redis_url must be a redis://, rediss:// or unix:// URL, got {scheme_of(url)}")
        return url

    @field_validator("ledger_url")
    @classmethod
    def _postgres_url(cls, url: str) -> str:
        if url and not url.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"ledger_url must be a postgresql:// URL (the fleet's shared ledger), got {scheme_of(url)}")
        return url

    @model_validator(mode="after")
    def _rollups_outlive_records(self) -> Settings:
        if self.ledger_rollup_retention_days < self.ledger_retention_days:
            raise ValueError("ledger_rollup_retention_days must be at least ledger_retention_days")
        return self

    # The YAML file named by PREFIXGATE_CONFIG (or passed to load_settings) sits below the environment.
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings)


def misspelt_environment(environ: Mapping[str, str]) -> list[str]:
    """One line per PREFIXGATE_* variable that is no setting but looks like one misspelt
    (PREFIXGATE_ADMN_TOKEN): the environment cannot refuse unknown names the way the file does, because
    callers' key variables (PREFIXGATE_KEY_TEAM_A) and other tools' variables share the prefix."""
    # Compared without the shared prefix, which would make every pair look alike.
    fields = {name.upper() for name in Settings.model_fields} | {"CONFIG"}
    lines = []
    for name in sorted(environ):
        suffix = name.removeprefix("PREFIXGATE_")
        if suffix == name or suffix in fields:
            continue
        close = difflib.get_close_matches(suffix, fields, n=1, cutoff=0.85)
        if close:
            lines.append(f"{name} is not a setting and is ignored; did you mean PREFIXGATE_{close[0]}?")
    return lines


def load_settings(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Settings from `config_file` (or $PREFIXGATE_CONFIG), then the environment, then `overrides`."""
    path = config_file or os.environ.get("PREFIXGATE_CONFIG")
    data: dict[str, Any] = {}
    if path:
        try:
            data = read_mapping(path, "config file")
        except YamlFileError as e:
            raise ConfigError(str(e)) from None
        for key in data:
            if key not in Settings.model_fields:
                raise ConfigError(f"config file {path}: {key}: {unknown_key(str(key), Settings.model_fields)}")
    # pydantic-settings matches variable names in any case (prefixgate_port too), so this does.
    env_keys = {k.upper().removeprefix("PREFIXGATE_").lower(): k for k in os.environ if k.upper().startswith("PREFIXGATE_")}
    # The environment overrides the file: drop file keys the environment sets.
    merged = {k: v for k, v in data.items() if k not in env_keys}
    given = {k: v for k, v in overrides.items() if v is not None}
    merged.update(given)

    def source(key: str) -> str:
        """Where the faulty value came from, so the message sends the operator to the right place."""
        if key in given:
            return f"--{key.replace('_', '-')}"
        if key in env_keys:
            return env_keys[key]
        return f"config file {path}: {key}" if key in data else key

    try:
        return Settings(**merged)
    except ValidationError as e:
        problems = "; ".join(f"{source(str(err['loc'][0])) + ': ' if err['loc'] else ''}"
                             f"{err['msg'].removeprefix('Value error, ')}" for err in e.errors())
        raise ConfigError(f"invalid settings: {problems}") from None
    except SettingsError as e:    # a variable's value pydantic-settings could not decode
        raise ConfigError(f"invalid settings: {e}") from None
