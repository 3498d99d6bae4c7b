// prefixgate cost dashboard: polls /api/overview and draws totals, SVG charts and tables.
// Plain DOM and SVG, no library and no build step; every data string goes in through textContent.
"use strict";

// At most one poll a second whatever the address asks: each poll reads the ledger (?refresh_ms=1 would never stop).
const MIN_REFRESH_MS = 1000;
const REFRESH_MS = Math.max(MIN_REFRESH_MS, Number(new URLSearchParams(location.search).get("refresh_ms")) || 3000);
const SVG = "http://www.w3.org/2000/svg";
const W = 640, H = 220, PAD = { l: 58, r: 10, t: 10, b: 24 };
const BENIGN = new Set(["cold", "no_checkpoint"]);
const state = { range: location.hash.slice(1) || "1h", by: "route", paused: false, data: null, timer: null };

// ---- formatting (the browser test mirrors fmtUsd) ------------------------------------------------

function fmtUsd(s) {
  const v = Number(s);
  if (v === 0) return "$0";
  const digits = Math.abs(v) >= 100 ? 2 : Math.abs(v) >= 1 ? 4 : 6;
  const text = Math.abs(v).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  return (v < 0 ? "-$" : "$") + text;
}
const fmtPct = (r) => (r === null || r === undefined ? "–" : (100 * r).toFixed(1) + "%");
const fmtMs = (ms) => (ms === null || ms === undefined ? "–" : ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : ms.toFixed(0) + " ms");
const fmtInt = (n) => n.toLocaleString("en-US");
function fmtTime(t, span) {
  const d = new Date(t * 1000);
  if (span > 2 * 86400) return d.toLocaleDateString("en-US", { month: "short", day: "numeric" }) + " " + d.toTimeString().slice(0, 5);
  return d.toTimeString().slice(0, span <= 3600 ? 8 : 5);
}

// ---- DOM helpers ---------------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}
function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
const $ = (sel) => document.querySelector(sel);

// ---- totals and alerts -----------------------------------------------------------------------------

function renderTotals(t) {
  const shown = {
    spend_usd: fmtUsd(t.spend_usd), spend_without_cache_usd: fmtUsd(t.spend_without_cache_usd),
    savings_usd: fmtUsd(t.savings_usd), hit_rate: fmtPct(t.hit_rate), requests: fmtInt(t.requests),
    ttft_p95_ms: fmtMs(t.ttft_p95_ms), response_avoided_usd: fmtUsd(t.response_cache.avoided_usd),
  };
  for (const node of document.querySelectorAll("[data-total]")) {
    const key = node.dataset.total;
    node.textContent = shown[key];
    const value = key === "response_avoided_usd" ? t.response_cache.avoided_usd : t[key];
    node.dataset.value = value === null ? "" : String(value);
    node.classList.toggle("negative", key === "savings_usd" && Number(t[key]) < 0);
  }
  const without = Number(t.spend_without_cache_usd);
  $("#sub-savings").textContent = without > 0 ? fmtPct(Number(t.savings_usd) / without) + " of the no-cache bill" : "";
  const byProvider = t.cost_check.priced_by_provider;
  $("#sub-spend").textContent = [t.unpriced ? `${fmtInt(t.unpriced)} unpriced, not in spend` : "",
    byProvider ? `${fmtInt(byProvider)} priced from the provider's reported cost` : ""].filter(Boolean).join("; ") || "priced from provider usage";
  $("#sub-hit").textContent = `${fmtInt(t.tokens.cache_read)} of ${fmtInt(t.tokens.uncached_input + t.tokens.cache_read + t.tokens.cache_write)} prompt tokens`;
  $("#sub-requests").textContent = `${fmtInt(t.errors)} error(s)`;
  const rc = t.response_cache;
  $("#sub-response-cache").textContent = `avoided by ${fmtInt(rc.hits)} replayed answer(s), apart from savings` +
    (rc.shadow_hits ? `; shadow: ${fmtInt(rc.shadow_hits)} would-be hit(s), ${fmtUsd(rc.shadow_avoidable_usd)}` : "");
  $("#sub-latency").textContent = `latency p50 ${fmtMs(t.latency_p50_ms)}, p95 ${fmtMs(t.latency_p95_ms)}`;
}

// Where the provider's own reported cost and the price table's differ by over 1%, and what has no price at all:
// never shown as $0 (the issue's rule), always named.
const fmtDelta = (d) => (d === null ? "" : ` (${d > 0 ? "+" : ""}${(100 * d).toFixed(1)}%)`);

function renderCostCheck(t, retiring = []) {
  const c = t.cost_check, box = $("#cost-check");
  box.replaceChildren();
  box.hidden = !c.disagreements && !t.unpriced && !retiring.length;
  if (box.hidden) return;
  box.append(el("h2", {}, "Cost check"));
  const list = el("ul");
  if (c.disagreements) {
    const d = c.disagreeing;
    list.append(el("li", { "data-check": "disagreements", "data-value": String(c.disagreements) },
      el("b", {}, `${fmtInt(c.disagreements)} of ${fmtInt(c.compared)} request(s)`),
      ` with a provider-reported cost differ from the price table by over 1%: on those the provider billed ${fmtUsd(d.provider_usd)}, the table gives ${fmtUsd(d.table_usd)}${fmtDelta(d.difference)}. Over all ${fmtInt(c.compared)}: ${fmtUsd(c.provider_usd)} against ${fmtUsd(c.table_usd)}${fmtDelta(c.difference)}. Spend shows the table's figure; update the price rows (providers_file) if the provider's is right.`));
  }
  if (t.unpriced) {
    list.append(el("li", { "data-check": "unpriced", "data-value": String(t.unpriced) },
      el("b", {}, `${fmtInt(t.unpriced)} request(s) unpriced`),
      ": their model has no price row and the provider reported no cost, so they are not in spend (not counted as $0). Add the model's prices in providers_file."));
  }
  for (const r of retiring) {
    list.append(el("li", { "data-check": "retiring", "data-value": `${r.route}/${r.model}` },
      el("b", {}, `Route ${r.route}: ${r.model} retires on ${r.retires}`),
      `${r.replacement ? ` (replacement ${r.replacement})` : ""}; ${fmtInt(r.requests)} recent request(s). Move the route, or set its on_retired policy.`));
  }
  box.append(list);
}

function checkText(r) {
  const parts = [];
  if (r.unpriced) parts.push(`${fmtInt(r.unpriced)} unpriced`);
  const c = r.cost_check;
  if (c.disagreements) {
    const d = c.disagreeing;
    parts.push(`provider ${fmtUsd(d.provider_usd)} vs table ${fmtUsd(d.table_usd)}${fmtDelta(d.difference)} on ${fmtInt(c.disagreements)} differing`);
  } else if (c.compared) {
    parts.push("agrees with provider");
  }
  if (c.priced_by_provider) parts.push(`${fmtInt(c.priced_by_provider)} priced by provider`);
  if (r.flips.count) parts.push(`${fmtInt(r.flips.count)} flip(s), ${fmtUsd(r.flips.cost_usd)} re-written`);
  return parts.join("; ");
}

// A row whose every answered request is unpriced has no spend to show: "unpriced", never "$0".
const money = (r, key) => (r.unpriced && r.unpriced === r.requests - r.errors ? "unpriced" : fmtUsd(r[key]));

function renderAlerts(alerts) {
  const firing = alerts.filter((a) => a.firing);
  const box = $("#alerts");
  box.hidden = firing.length === 0;
  box.replaceChildren();
  if (!firing.length) return;
  box.append(el("h2", {}, `Hit rate dropped on ${firing.length} route(s)`));
  const list = el("ul");
  for (const a of firing) {
    list.append(el("li", { "data-route": a.route }, el("b", {}, a.route), `: ${fmtPct(a.hit_rate)} now against ${fmtPct(a.baseline_hit_rate)} over its trailing baseline (${(100 * a.drop).toFixed(0)}% drop, ${a.requests} recent request(s)). A deploy that changed the prompt's structure is the usual cause: see the misses below.`));
  }
  box.append(list);
}

// ---- charts -----------------------------------------------------------------------------------------

function axes(node, yMax, yFmt, points, span) {
  const ih = H - PAD.t - PAD.b;
  for (const f of [0, 0.5, 1]) {
    const y = PAD.t + ih * (1 - f);
    node.append(svg("line", { x1: PAD.l, x2: W - PAD.r, y1: y, y2: y, class: "axis" }));
    node.append(svg("text", { x: PAD.l - 6, y: y + 4, "text-anchor": "end" }, yFmt(yMax * f)));
  }
  const iw = W - PAD.l - PAD.r;
  // Labels at the window's start, middle and end (the end anchored so it stays inside the chart).
  for (const [f, anchor] of [[0, "start"], [0.5, "middle"], [1, "end"]]) {
    const t = points.length ? points[0].t + f * span : 0;
    node.append(svg("text", { x: PAD.l + iw * f, y: H - 6, "text-anchor": anchor }, fmtTime(t, span)));
  }
}

function spendChart(points, span) {
  const node = $("#chart-spend");
  node.replaceChildren();
  const tops = points.map((p) => Math.max(Number(p.spend_usd) + Math.max(Number(p.savings_usd), 0), Number(p.spend_usd)));
  const yMax = Math.max(...tops, 0);
  if (yMax === 0) {
    node.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no spend in this window"));
    return;
  }
  axes(node, yMax, (v) => (v === 0 ? "$0" : "$" + Number(v.toPrecision(3))), points, span);
  const ih = H - PAD.t - PAD.b, iw = W - PAD.l - PAD.r, bw = iw / points.length;
  const scale = (v) => (ih * v) / yMax;
  points.forEach((p, i) => {
    const spend = Number(p.spend_usd), saved = Number(p.savings_usd);
    const x = PAD.l + i * bw + bw * 0.1, w = Math.max(bw * 0.8, 1);
    const hs = scale(spend), hv = scale(Math.abs(saved));
    const g = svg("g");
    g.append(svg("title", {}, `${fmtTime(p.t, span)}: spend ${fmtUsd(p.spend_usd)}, saved ${fmtUsd(p.savings_usd)}, ${p.requests} request(s), hit rate ${fmtPct(p.hit_rate)}`));
    g.append(svg("rect", { x, width: w, y: PAD.t + ih - hs, height: hs, class: "spend" }));
    // Savings stack on spend (together: the bill without caching); negative savings (writes that did not pay) show red.
    if (saved > 0) g.append(svg("rect", { x, width: w, y: PAD.t + ih - hs - hv, height: hv, class: "saved" }));
    if (saved < 0) g.append(svg("rect", { x, width: w, y: PAD.t + ih - hs, height: Math.min(hv, hs), class: "lost" }));
    node.append(g);
  });
}

function hitChart(points, span) {
  const node = $("#chart-hit");
  node.replaceChildren();
  if (!points.some((p) => p.hit_rate !== null)) {
    node.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no prompt tokens in this window"));
    return;
  }
  axes(node, 1, (v) => (100 * v).toFixed(0) + "%", points, span);
  const ih = H - PAD.t - PAD.b, iw = W - PAD.l - PAD.r, n = points.length;
  let run = [];
  const flush = () => {
    if (run.length > 1) node.append(svg("polyline", { points: run.join(" "), class: "line" }));
    run = [];
  };
  points.forEach((p, i) => {
    if (p.hit_rate === null) return flush();
    const x = PAD.l + iw * (i + 0.5) / n, y = PAD.t + ih * (1 - p.hit_rate);
    run.push(`${x.toFixed(1)},${y.toFixed(1)}`);
    const dot = svg("circle", { cx: x, cy: y, r: 2.5, class: "pt" });
    dot.append(svg("title", {}, `${fmtTime(p.t, span)}: ${fmtPct(p.hit_rate)} of prompt tokens from cache, ${p.requests} request(s)`));
    node.append(dot);
  });
  flush();
}

// ---- tables -----------------------------------------------------------------------------------------

function segmentText(seg) {
  if (!seg) return el("span", { class: "fix" }, "none: the prefix matched the previous request");
  const out = el("span", {}, `#${seg.index} ${seg.role}, ~${fmtInt(seg.tokens)} tokens `);
  for (const k of seg.volatile_kinds) out.append(el("span", { class: "kind" }, k));
  return out;
}

function renderMisses(routes) {
  const body = $("#misses-body");
  body.replaceChildren();
  if (!routes.length) {
    body.append(el("tr", {}, el("td", { colspan: 6, class: "empty" }, "no misses in this window")));
    return;
  }
  for (const r of routes) {
    const top = r.top_reason;
    const why = el("td", { class: "why" });
    const p = r.provider;
    if (p) {
      // The provider's own reason wins the "why"; the inference's is shown beside it, with how often they agreed.
      why.append(el("span", { class: "reason provider", "data-provider-reason": p.top.reason }, p.top.label));
      why.append(el("span", { class: "detail" }, p.reasons.map((e) =>
        `${e.label} ×${e.count}: ${fmtUsd(e.missed_usd)} lost (${fmtInt(e.missed_tokens)} tokens)`).join("; ")));
      const agreement = p.compared ? `our inference agreed on ${p.agreed} of ${p.compared} (${fmtPct(p.agreement)})` : "no miss of ours to compare";
      why.append(el("span", { class: "fix", "data-agreement": p.agreement === null ? "" : String(p.agreement) },
        (top ? `we inferred: ${top.label}; ` : "") + agreement));
    } else {
      why.append(el("span", { class: "reason" + (BENIGN.has(top.reason) ? " benign" : ""), "data-reason": top.reason }, top.label),
        el("span", { class: "detail" }, top.detail), el("span", { class: "fix" }, "fix: " + top.fix));
    }
    const others = r.reasons.slice(p ? 0 : 1).map((e) => `${e.label} ×${e.count}`);
    if (others.length) why.append(el("span", { class: "others" }, (p ? "inferred: " : "also: ") + others.join(", ")));
    const diff = r.first_difference;
    const lines = r.latest_miss ? r.latest_miss.plan : [];
    const plan = el("details", {}, el("summary", {}, `${lines.length} line(s)`), el("ol", {}, ...lines.map((line) => el("li", {}, line))));
    body.append(el("tr", { "data-route": r.route },
      el("td", {}, el("b", {}, r.route), el("span", { class: "fix" }, r.latest_miss ? r.latest_miss.model : "")),
      el("td", { class: "num" }, `${fmtInt(r.misses)} / ${fmtInt(r.requests)}`),
      el("td", { class: "num" }, fmtUsd(r.missed_usd)),
      why,
      el("td", { class: "diff" }, diff ? segmentText(diff.segment) : segmentText(top ? top.segment : null)),
      el("td", {}, plan)));
  }
}

function renderRewrites(routes) {
  const body = $("#rewrites-body");
  body.replaceChildren();
  if (!routes.length) body.append(el("tr", {}, el("td", { colspan: 7, class: "empty" }, "nothing rewritten in this window")));
  for (const r of routes) {
    body.append(el("tr", { "data-route": r.route }, el("td", {}, el("b", {}, r.route)),
      el("td", { class: "num" }, `${fmtInt(r.rewritten)} / ${fmtInt(r.requests)}`),
      el("td", { class: "num" }, fmtInt(r.units_moved)), el("td", { class: "num" }, fmtInt(r.chars_moved)),
      el("td", {}, r.why.join(", ")), el("td", { class: "num" }, fmtInt(r.cache_read_tokens)),
      el("td", { class: "num" }, fmtUsd(r.saved_usd))));
  }
}

// Keep-alive per route: refreshes bought (in spend) against what the reads they kept alive saved.
function renderKeepAlive(rows) {
  const body = $("#keepalive-body");
  body.replaceChildren();
  const kept = rows.filter((r) => r.keepalive.refreshes || Number(r.keepalive.saved_usd));
  if (!kept.length) body.append(el("tr", {}, el("td", { colspan: 5, class: "empty" }, "no keep-alive refreshes in this window")));
  for (const r of kept) {
    const k = r.keepalive, net = Number(k.saved_usd) - Number(k.bought_usd);
    body.append(el("tr", { "data-route": r.name }, el("td", {}, el("b", {}, r.name)),
      el("td", { class: "num" }, fmtInt(k.refreshes)), el("td", { class: "num" }, fmtUsd(k.bought_usd)),
      el("td", { class: "num" }, fmtUsd(k.saved_usd)),
      el("td", { class: "num" + (net < 0 ? " negative" : "") }, fmtUsd(String(net)))));
  }
}

function renderBreakdown() {
  const body = $("#breakdown-body");
  const rows = state.data ? state.data.breakdowns[state.by] : [];
  const firing = new Set(state.data ? state.data.alerts.filter((a) => a.firing).map((a) => a.route) : []);
  body.replaceChildren();
  if (!rows.length) body.append(el("tr", {}, el("td", { colspan: 9, class: "empty" }, "no requests in this window")));
  for (const r of rows) {
    const name = el("td", {}, r.name || "(none)");
    if (state.by === "route" && firing.has(r.name)) name.append(el("span", { class: "badge" }, "hit rate drop"));
    body.append(el("tr", { "data-name": r.name }, name,
      el("td", { class: "num" }, fmtInt(r.requests)), el("td", { class: "num" }, money(r, "spend_usd")),
      el("td", { class: "num" }, money(r, "spend_without_cache_usd")), el("td", { class: "num" }, money(r, "savings_usd")),
      el("td", { class: "num" }, fmtPct(r.hit_rate)), el("td", { class: "num" }, fmtMs(r.ttft_p95_ms)),
      el("td", { class: "num" }, fmtInt(r.errors)),
      el("td", { class: "check" + (r.unpriced || r.cost_check.disagreements ? " flagged" : "") }, checkText(r))));
  }
}

// A bar per row: spent (solid), forecast (light), soft budget (dashed line), hard budget (solid line).
function budgetBar(f) {
  const width = 220, height = 14;
  const values = [Number(f.spent_usd), Number(f.forecast_usd || 0), f.soft_usd || 0, f.hard_usd || 0];
  const max = Math.max(...values) * 1.1 || 1;
  const x = (v) => (width * v) / max;
  const node = svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, class: "budget" });
  if (f.forecast_usd !== null) node.append(svg("rect", { x: 0, y: 2, width: x(Number(f.forecast_usd)), height: height - 4, class: "forecast" }));
  node.append(svg("rect", { x: 0, y: 2, width: x(Number(f.spent_usd)), height: height - 4, class: "spend" }));
  if (f.soft_usd !== null) node.append(svg("line", { x1: x(f.soft_usd), x2: x(f.soft_usd), y1: 0, y2: height, class: "soft" }));
  if (f.hard_usd !== null) node.append(svg("line", { x1: x(f.hard_usd), x2: x(f.hard_usd), y1: 0, y2: height, class: "hard" }));
  return node;
}

function renderForecast(data) {
  $("#forecast-method").textContent = data.method;
  const body = $("#forecast-body");
  body.replaceChildren();
  const rows = [["gateway", data.gateway], ...data.keys.map((k) => ["key", k]), ...data.routes.map((r) => ["route", r])];
  for (const [kind, f] of rows) {
    const usd = (v) => (v === null ? "–" : fmtUsd(v));
    const flags = [f.over_soft ? "past the soft budget" : "", f.forecast_over ? "forecast over budget" : ""].filter(Boolean);
    body.append(el("tr", { "data-kind": kind, "data-name": f.name, class: flags.length ? "flagged" : "" },
      el("td", {}, el("span", { class: "fix" }, kind + " "), f.name), el("td", {}, f.period),
      el("td", { class: "num" }, fmtUsd(f.spent_usd)), el("td", { class: "num", "data-forecast": f.forecast_usd || "" }, usd(f.forecast_usd)),
      el("td", { class: "num" }, usd(f.soft_usd)), el("td", { class: "num" }, usd(f.hard_usd)),
      el("td", {}, budgetBar(f), el("span", { class: "fix" }, flags.join("; ")))));
  }
}

async function refreshForecast() {
  try {
    const resp = await fetch("/api/forecast", { credentials: "same-origin", cache: "no-store" });
    // A tenant's reader: forecasts span every tenant's keys and routes, so the section is not drawn.
    $("#forecast").hidden = resp.status === 403;
    if (resp.ok) renderForecast(await resp.json());
  } catch (e) {
    // The overview's error line already says when the API is unreachable.
  }
}

// ---- polling -----------------------------------------------------------------------------------------

async function refresh() {
  clearTimeout(state.timer);
  try {
    const resp = await fetch(`/api/overview?range=${encodeURIComponent(state.range)}`, { credentials: "same-origin", cache: "no-store" });
    if (resp.status === 401) { location.reload(); return; }
    if (!resp.ok) throw new Error(`${resp.status} ${await resp.text()}`);
    const data = await resp.json();
    state.data = data;
    const span = data.window.until - data.window.since;
    renderTotals(data.totals);
    renderAlerts(data.alerts);
    renderCostCheck(data.totals, data.retiring || []);
    spendChart(data.points, span);
    hitChart(data.points, span);
    renderMisses(data.misses);
    renderRewrites(data.rewrites);
    renderKeepAlive(data.breakdowns.route);
    renderBreakdown();
    await refreshForecast();
    const scope = data.window.tenant === null || data.window.tenant === undefined ? "" : ` · tenant ${data.window.tenant}`;
    $("#source").textContent = `ledger: ${data.window.source}${scope} · ${fmtTime(data.window.since, span)} – ${fmtTime(data.window.until, span)}`;
    $("#updated").textContent = "updated " + new Date().toTimeString().slice(0, 8);
    $("#error").hidden = true;
    document.body.classList.remove("stale");
    document.body.dataset.loaded = String(Number(document.body.dataset.loaded || 0) + 1);
  } catch (e) {
    $("#error").hidden = false;
    $("#error").textContent = "Could not load the dashboard data: " + e.message;
    document.body.classList.add("stale");
  }
  if (!state.paused) state.timer = setTimeout(refresh, REFRESH_MS);
}

function selectRange(range) {
  state.range = range;
  history.replaceState(null, "", "#" + range);
  for (const b of document.querySelectorAll("#ranges button")) b.classList.toggle("on", b.dataset.range === range);
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("#ranges button")) b.addEventListener("click", () => selectRange(b.dataset.range));
  for (const b of document.querySelectorAll("#groupings button")) {
    b.addEventListener("click", () => {
      state.by = b.dataset.by;
      for (const o of document.querySelectorAll("#groupings button")) o.classList.toggle("on", o === b);
      renderBreakdown();
    });
  }
  $("#pause").addEventListener("click", () => {
    state.paused = !state.paused;
    $("#pause").textContent = state.paused ? "Resume" : "Pause";
    document.body.classList.toggle("paused", state.paused);
    if (!state.paused) refresh(); else clearTimeout(state.timer);
  });
  selectRange(state.range);
});
