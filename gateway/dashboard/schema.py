"""Response models of the dashboard API: they document the JSON in the OpenAPI schema and check it.

Money is a decimal string (exact ledger sums); hit rates are fractions in [0, 1], null where a window
had no prompt tokens; times are unix seconds.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Window(BaseModel):
    since: float
    until: float
    source: str = Field(description="`sqlite` (this replica's ledger file), `postgres` or `redis` (every replica's records)")
    tenant: str | None = Field(None, description="the tenant a reader's figures and records are limited to; null: every tenant")


class Tokens(BaseModel):
    uncached_input: int
    cache_read: int
    cache_write: int
    output: int


class Against(BaseModel):
    provider_usd: str = Field(description="what the provider reported for these requests")
    table_usd: str = Field(description="what the price table gives for the same requests")
    difference_usd: str = Field(description="provider_usd - table_usd")
    difference: float | None = Field(description="difference_usd / table_usd; null when table_usd is 0")


class CostCheck(Against):
    compared: int = Field(description="requests priced by the price table whose provider also reported their cost "
                                      "(the amounts above are over these)")
    disagreements: int = Field(description="of those, the ones where the two differ by over 1%")
    disagreeing: Against = Field(description="the amounts over the disagreeing requests alone")
    priced_by_provider: int = Field(description="requests with no price row, priced from the provider's reported cost")


class ResponseCacheTotals(BaseModel):
    hits: int = Field(description="requests answered from the response cache, with no upstream call ($0 spent)")
    avoided_usd: str = Field(description="what the replayed answers cost when they were made: spend avoided, not "
                                         "part of savings_usd (prompt caching)")
    shadow_hits: int = Field(description="shadow mode: requests the cache would have answered (sent upstream anyway)")
    shadow_avoidable_usd: str = Field(description="what those shadow-mode requests cost: what serving them would avoid")


class KeepAliveTotals(BaseModel):
    refreshes: int = Field(description="keep-alive refreshes sent (ledger rows of kind keepalive; not callers' requests, "
                                       "so not in requests or errors)")
    bought_usd: str = Field(description="what the refreshes cost (part of spend_usd)")
    saved_usd: str = Field(description="what the sessions' next requests saved by reading a prefix only a refresh "
                                       "kept alive, against writing it again")


class Flips(BaseModel):
    count: int = Field(description="balanced routes: requests whose prefix moved to a target where it was cold "
                                   "(failover while it was warm elsewhere, or after its TTL)")
    cost_usd: str = Field(description="what writing those prefixes again cost over reading them where they were warm")


class Totals(BaseModel):
    requests: int = Field(description="callers' requests; the gateway's own rows (keep-alive refreshes, abandoned "
                                      "attempts, explicit caches' upkeep) are not, though their cost is in spend_usd")
    errors: int = Field(description="callers' requests answered with a non-200 status")
    unpriced: int = Field(description="answered requests with no price row and no provider-reported cost (not in "
                                      "spend, never counted as $0)")
    cost_check: CostCheck
    spend_usd: str
    spend_without_cache_usd: str = Field(description="the same requests billed with no caching at all")
    savings_usd: str = Field(description="spend_without_cache_usd - spend_usd; negative when writes did not pay")
    hit_rate: float | None = Field(description="cache-read tokens / all prompt tokens, of callers' requests (the gateway's "
                                               "own rows, such as keep-alive refreshes, are left out; tokens has them)")
    tokens: Tokens
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    ttft_p95_ms: float | None
    response_cache: ResponseCacheTotals
    keepalive: KeepAliveTotals
    flips: Flips


class Summary(BaseModel):
    window: Window
    totals: Totals


class Point(BaseModel):
    t: float = Field(description="bucket start")
    requests: int = Field(description="callers' requests, as in the totals")
    spend_usd: str
    savings_usd: str
    spend_without_cache_usd: str
    hit_rate: float | None = Field(description="callers' requests', as in the totals")


class Timeseries(BaseModel):
    window: Window
    step_s: float
    points: list[Point]


class Row(Totals):
    name: str = Field(description="the route, model, key, target, provider or tenant ('' when none; a tenant's "
                                  "reader gets its own rows only)")


class Breakdown(BaseModel):
    window: Window
    by: str
    rows: list[Row]


class SegmentRef(BaseModel):
    index: int = Field(description="position in the request's prefix order (tools, system, then turns)")
    role: str
    tokens: int = Field(description="approximate size of the segment")
    volatile_kinds: list[str] = Field(description="volatile-span detectors that fire in it (leading segments)")


class Difference(BaseModel):
    request_id: str
    previous_id: str
    ts: float
    segment: SegmentRef


class Reason(BaseModel):
    reason: str = Field(description="volatile_span, below_minimum, ttl_expired, tools_reordered, blocks_reordered, "
                                    "tools_changed, prefix_changed, no_checkpoint, planner_off, cold, provider")
    label: str
    fix: str
    detail: str = Field(description="the latest such miss in words")
    count: int
    missed_usd: str
    request_id: str = Field(description="the latest miss with this reason")
    segment: SegmentRef | None = Field(description="its first segment differing from the previous request")


class LatestMiss(BaseModel):
    request_id: str
    ts: float
    model: str
    plan: list[str] = Field(description="the planner's explanation for that request")
    miss_reason: str


class ProviderReason(BaseModel):
    reason: str = Field(description="the provider's own word: tools_changed, reasoning_effort_changed, "
                                    "previous_message_not_found, ...")
    label: str
    count: int
    missed_tokens: int = Field(description="tokens the provider says were not read from cache")
    missed_usd: str = Field(description="those tokens at the input price less the cache-read price")
    compared: int = Field(description="of these, misses the gateway also diagnosed")
    agreed: int = Field(description="of those, where its inferred reason said the same")
    request_id: str = Field(description="the latest request with this reason")
    inferred: str | None = Field(description="the gateway's inferred reason for that request (None: not a miss to it)")


class ProviderReasons(BaseModel):
    reasons: list[ProviderReason]
    top: ProviderReason = Field(description="the reason losing the most: the route's \"why\" (the provider wins)")
    compared: int
    agreed: int
    agreement: float | None = Field(description="agreed / compared: how often the inference matched the provider")


class RouteMisses(BaseModel):
    route: str
    requests: int
    misses: int
    miss_rate: float
    missed_usd: str = Field(description="what reading each miss's prefix from cache would have saved")
    top_reason: Reason | None = Field(description="the inferred reason losing the most (None: no inferred misses)")
    reasons: list[Reason]
    first_difference: Difference | None = Field(description="latest consecutive pair of the route that differ")
    latest_miss: LatestMiss | None
    provider: ProviderReasons | None = Field(None, description="what the provider itself said (cache diagnostics)")


class Misses(BaseModel):
    window: Window
    routes: list[RouteMisses]


class RouteRewrites(BaseModel):
    route: str
    requests: int
    rewritten: int = Field(description="requests the static-first rewrite moved units in")
    units_moved: int = Field(description="units (sentences, clauses, fields) moved out of the cached prefix")
    chars_moved: int
    why: list[str] = Field(description="learned (seen to vary), held (learned earlier), detected, declared (policy)")
    cache_read_tokens: int = Field(description="tokens the rewritten requests read from cache")
    saved_usd: str = Field(description="what the rewritten requests saved against no caching")


class Rewrites(BaseModel):
    window: Window
    routes: list[RouteRewrites]


class Alert(BaseModel):
    route: str
    hit_rate: float | None = Field(description="callers' requests' over the alert window")
    baseline_hit_rate: float | None = Field(description="over the trailing baseline before it")
    drop: float | None = Field(description="(baseline - current) / baseline")
    requests: int
    baseline_requests: int
    firing: bool


class AlertRuleOut(BaseModel):
    window_s: float
    baseline_s: float
    drop: float
    min_baseline: float
    min_requests: int


class Alerts(BaseModel):
    now: float
    rule: AlertRuleOut
    alerts: list[Alert]


class RetiringRoute(BaseModel):
    route: str
    provider: str
    model: str
    retires: str = Field(description="the provider's retirement date (ISO); past for a retired model")
    replacement: str | None
    requests: int = Field(description="requests in the window's latest sample")


class Overview(BaseModel):
    window: Window
    totals: Totals
    step_s: float
    points: list[Point]
    breakdowns: dict[str, list[Row]] = Field(description="by route, model, key and target")
    misses: list[RouteMisses]
    rewrites: list[RouteRewrites]
    alerts: list[Alert] = Field(description="per-route hit-rate drops; empty for a tenant's reader (they span every tenant)")
    retiring: list[RetiringRoute] = Field(default_factory=list, description="routes using models retiring within 30 days")


class RequestRecord(BaseModel):
    id: str
    ts: float
    route: str
    target: str
    model: str
    key: str
    status: int
    stream: bool
    uncached_input: int
    cache_read: int
    cache_writes: dict[str, int]
    output: int
    cost_usd: str | None
    provider_cost_usd: str | None = Field(None, description="the provider's own reported cost, where it gives one")
    savings_usd: str | None
    latency_ms: float
    ttft_ms: float | None
    plan_summary: str
    explanation: list[str]
    miss_reason: str
    provider_miss_reason: str = Field("", description="the provider's own reason (cache diagnostics); \"\": none")
    provider_missed_tokens: int | None = Field(None, description="tokens the provider says were not read from cache")
    error: str


class RequestDetail(RequestRecord):
    why: dict = Field(description="the provider's reason where it gave one (source: provider), else the gateway's")
    segments: list[str]
    dialect: str
    attempts: int
    cache_key_mode: str = Field("", description="what the route did with prompt_cache_key: derive, keep or off")
    prompt_cache_key: str = Field("", description="the prompt_cache_key sent upstream (\"\": none)")


class Requests(BaseModel):
    window: Window
    records: list[RequestRecord]


class ForecastRow(BaseModel):
    name: str
    period: str = Field(description="the budget period: minute, hour, day, month (calendar day and month, in the budget's time zone) or total")
    period_start: float
    period_end: float | None
    spent_usd: str = Field(description="spend so far in the period")
    forecast_usd: str | None = Field(description="spend at the period's end at the run rate so far")
    hard_usd: float | None = Field(description="the budget (a key's is enforced)")
    soft_usd: float | None = Field(description="usd x warn_at: an alert, never a refusal")
    over_soft: bool
    forecast_over: bool


class Forecasts(BaseModel):
    method: str
    now: float
    gateway: ForecastRow
    keys: list[ForecastRow]
    routes: list[ForecastRow]


class LastFiring(BaseModel):
    subject: str
    ts: float


class AlertRuleState(BaseModel):
    rule: str
    fires_when: str
    last_fired: LastFiring | None


class AlertDestination(BaseModel):
    destination: str = Field(description="scheme and host only: the URL's path holds the hook's secret")
    format: str


class AlertRules(BaseModel):
    destinations: list[AlertDestination]
    settings: dict
    rules: list[AlertRuleState]
