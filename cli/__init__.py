"""The `prefixgate` command: one CLI for every surface."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from prefixgate.config import ConfigError, Settings, load_settings, misspelt_environment

if TYPE_CHECKING:
    from prefixgate.providers.rules import Catalog


# A TCP port: uvicorn would bind 70000 as 70000 % 65536 (4464), a port nobody asked for, without a word.
PORT = click.IntRange(1, 65535)


def _settings(ctx: click.Context, **overrides: object) -> Settings:
    try:
        return load_settings(ctx.obj.get("config"), **overrides)
    except ConfigError as e:
        raise click.UsageError(str(e)) from None


def _files_usable(settings: Settings) -> Catalog:
    """The providers file and the ledger's folder, checked before anything listens: the gateway opens them
    as it starts, where a fault is a traceback and an exit status of 3."""
    from pathlib import Path

    from prefixgate.providers.rules import RulesError, load_catalog

    try:
        catalog = load_catalog(settings.providers_file or None)
    except RulesError as e:
        raise click.UsageError(str(e)) from None
    ledger = settings.ledger_path
    if ledger == ":memory:" or ledger.startswith("file:"):
        return catalog
    if Path(ledger).is_dir():
        raise click.UsageError(f"ledger_path {ledger} is a directory; name the ledger file (e.g. {ledger}/prefixgate-ledger.sqlite)")
    if not Path(ledger).resolve().parent.is_dir():
        raise click.UsageError(f"ledger_path {ledger}: its folder {Path(ledger).parent} does not exist")
    return catalog


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config", type=click.Path(dir_okay=False), envvar="PREFIXGATE_CONFIG",
              help="YAML settings file (PREFIXGATE_* environment variables override it).")
@click.version_option(package_name="prefixgate")
@click.pass_context
def main(ctx: click.Context, config: str | None) -> None:
    """prefixgate: make LLM prompt prefixes reusable, cheaper and faster."""
    ctx.ensure_object(dict)
    ctx.obj["config"] = config


@main.command()
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
              help="YAML settings file (as `prefixgate --config FILE serve`; PREFIXGATE_* variables override it).")
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=PORT, default=None, help="Port to listen on (default 8080).")
@click.option("--local-model", default=None, help="Serve this local model in-process, e.g. smollm2-135m.")
@click.option("--open", "open_gateway", is_flag=True,
              help="Serve beyond loopback despite exposures (setting open_gateway; warned at every start).")
@click.option("--check", is_flag=True, help="Print what this configuration exposes and exit (1 on an exposure).")
@click.pass_context
def serve(ctx: click.Context, config: str | None, host: str | None, port: int | None, local_model: str | None,
          open_gateway: bool, check: bool) -> None:
    """Run the gateway: OpenAI, Anthropic, Gemini, Bedrock and Vertex AI clients use it by changing their base URL."""
    import uvicorn

    from prefixgate.gateway.app import create_app
    from prefixgate.gateway.logs import configure
    from prefixgate.gateway.protected_mode import ExposureRefused
    from prefixgate.policies import PolicyError, load_policy

    if config is not None:
        ctx.obj["config"] = config
    # Without --open the config file's (or environment's) open_gateway stands.
    settings = _settings(ctx, host=host, port=port, local_model=local_model, open_gateway=open_gateway or None)
    for line in misspelt_environment(os.environ):
        click.echo(f"warning: {line}", err=True)
    catalog = _files_usable(settings)
    try:
        policy = load_policy(settings)
    except PolicyError as e:
        raise click.UsageError(str(e)) from None
    from datetime import UTC, datetime

    from prefixgate.policies.catalogued import model_warnings
    from prefixgate.policies.credentials import missing_credentials
    from prefixgate.policies.fleet import unshared_limits

    for line in (model_warnings(policy, catalog, datetime.now(UTC).date()) + missing_credentials(policy)
                 + unshared_limits(policy, bool(settings.ledger_url), bool(settings.redis_url))):
        click.echo(f"warning: {line}", err=True)
    if check:
        from prefixgate.gateway.exposure import summarize

        summary = summarize(settings, policy)
        click.echo(summary.render())
        sys.exit(1 if summary.exposures else 0)
    configure(settings.log_level)
    try:
        app = create_app(settings, policy=policy, catalog=catalog)     # the providers file, parsed once
    except ExposureRefused as e:
        raise click.ClickException(str(e)) from None
    except (PolicyError, ConfigError) as e:
        raise click.UsageError(str(e)) from None
    from prefixgate.gateway.slow_clients import protocol_for

    # The gateway logs one JSON line per request itself (with route, usage and cost), so no access log.
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level, access_log=False,
                http=protocol_for(settings.client_timeout_s))


def _engine_options(command: click.decorators.FC) -> click.decorators.FC:
    """One option per EngineConfig field (vLLM's spelling: --max-num-seqs, --enable-prefix-caching/--no-...)."""
    from dataclasses import MISSING, fields

    from prefixgate.local_backend.config import EngineConfig

    for f in reversed(fields(EngineConfig)):
        if f.name == "model":
            continue
        flag = "--" + f.name.replace("_", "-")
        default = None if f.default is MISSING else f.default
        help_text = f"EngineConfig.{f.name} (default: {default if default is not None else 'automatic'})."
        if "bool" in str(f.type):
            command = click.option(f"{flag}/--no-{flag[2:]}", f.name, default=None, help=help_text)(command)
        elif "choices" in f.metadata:
            command = click.option(flag, f.name, type=click.Choice(f.metadata["choices"]), default=None,
                                   help=help_text)(command)
        else:
            kind = int if str(f.type).startswith("int") else float if str(f.type).startswith("float") else str
            command = click.option(flag, f.name, type=kind, default=None, help=help_text)(command)
    return command


@main.command()
@click.option("--model", default="smollm2-135m", show_default=True,
              help="smollm2-135m, an HF folder, a .safetensors or a .gguf file.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=PORT, default=8100, show_default=True)
@click.option("--api-key", envvar="PREFIXGATE_BACKEND_API_KEY", default="",
              help="Require this Bearer token on /v1 requests (also PREFIXGATE_BACKEND_API_KEY).")
@click.option("--open", "open_backend", is_flag=True,
              help="Serve beyond loopback without an API key (warned at start).")
@_engine_options
def backend(model: str, host: str, port: int, api_key: str, open_backend: bool, **engine_options: object) -> None:
    """Serve the bundled local engine over an OpenAI-compatible API."""
    from prefixgate.local_backend.model_loader import ModelNotFound
    from prefixgate.local_backend.server import BackendExposed, serve

    options = {k: v for k, v in engine_options.items() if v is not None}
    try:
        serve(model, host=host, port=port, api_key=api_key, open_backend=open_backend, **options)
    except BackendExposed as e:
        raise click.ClickException(str(e)) from None
    except (ModelNotFound, ValueError) as e:
        raise click.UsageError(str(e)) from None


# An empty trace (often `ledger export` without ledger_bodies) printed nothing, or a table of zeros, and exit 0.
_EMPTY = "{trace} holds no requests (an empty file or only blank lines); `ledger export` writes them only with ledger_bodies"


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("--mode", type=click.Choice(["rewrite", "checkpoints", "off"]), default="rewrite", show_default=True,
              help="rewrite static-first and place checkpoints, only place checkpoints, or pass through.")
@click.option("--caller-checkpoints", "caller", type=click.Choice(["keep", "add", "optimize"]), default="keep",
              show_default=True, help="for requests that carry their own cache markers: send them as they are, add "
              "the planner's where they pay, or replace them where the planner expects it cheaper.")
@click.option("--keepalive", is_flag=True, help="also print the cache refreshes the planner would send while "
              "sessions idle, as records marked \"keepalive\": true, in time order (every original request is kept).")
def plan(trace: str, mode: str, caller: str, keepalive: bool) -> None:
    """Plan each request of TRACE.jsonl as the gateway would, learning as it goes, and print the
    records with `body` planned and a `plan` field explaining each decision."""
    import json

    from prefixgate.cache_planner.trace import plan_trace
    from prefixgate.providers.trace import TraceError, iter_trace

    planned = 0
    try:
        for record in plan_trace(iter_trace(trace), mode, caller, keepalive):  # type: ignore[arg-type]
            click.echo(json.dumps(record, ensure_ascii=False))
            planned += 1
    except TraceError as e:
        raise click.ClickException(str(e)) from None
    if not planned:
        raise click.ClickException(_EMPTY.format(trace=trace))


@main.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False))
@click.option("--strategy", type=click.Choice(["passthrough", "planner"]), default="passthrough")
@click.option("--caller-checkpoints", "caller", type=click.Choice(["keep", "add", "optimize"]), default=None,
              help="with --strategy planner: what the planner does with the caller's own cache markers "
              "(default keep; see `prefixgate plan --help`).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def replay(ctx: click.Context, trace: str, strategy: str, caller: str | None, as_json: bool) -> None:
    """Replay TRACE.jsonl through the provider cache simulator and report cost and savings.

    Each line: {"t": seconds, "provider": "anthropic"|"openai"|"gemini"|"bedrock", "model": ..., "route": ...,
    "tenant": ..., "output_tokens": N, "body": <native request body>}. See docs/providers.md for details.
    """
    import json

    from prefixgate.providers.rules import RulesError, load_catalog
    from prefixgate.providers.trace import TraceError, read_trace
    from prefixgate.simulation.replay import STRATEGIES, ReplayError, progress_bar, render_table
    from prefixgate.simulation.replay import replay as run_replay

    if caller is not None and strategy != "planner":
        raise click.UsageError("--caller-checkpoints applies to --strategy planner only")
    settings = _settings(ctx)
    try:
        catalog = load_catalog(settings.providers_file or None)
        if caller is not None:
            from prefixgate.cache_planner.trace import replay_strategy

            chosen = replay_strategy(caller=caller)  # type: ignore[arg-type]
        else:
            chosen = STRATEGIES[strategy]()
        records = read_trace(trace)
    except (RulesError, ReplayError, TraceError) as e:
        raise click.ClickException(str(e)) from None
    if not records:
        raise click.ClickException(_EMPTY.format(trace=trace))
    with progress_bar(len(records)) as bar:
        report = run_replay(records, chosen, strategy_name=strategy, catalog=catalog, progress=bar.update)
    click.echo(json.dumps(report.to_dict(), indent=2) if as_json else render_table(report))


@main.group()
def ledger() -> None:
    """The gateway's request ledger."""


@ledger.command("export")
@click.option("--trace", "trace_out", required=True, type=click.Path(dir_okay=False, writable=True),
              help="Write a replay trace (the format `prefixgate replay` reads) to this file.")
@click.option("--ledger", "ledger_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The ledger file (default: the ledger_path setting).")
@click.pass_context
def ledger_export(ctx: click.Context, trace_out: str, ledger_path: str | None) -> None:
    """Export recorded requests as a trace. Bodies are kept only with the ledger_bodies setting."""
    import sqlite3

    from prefixgate.ledger import export_trace

    path = ledger_path or _settings(ctx).ledger_path
    _is_ledger(path)
    try:
        written, skipped = export_trace(path, trace_out)
    except (OSError, sqlite3.Error) as e:
        raise click.ClickException(f"cannot export {path}: {e}") from None
    click.echo(f"wrote {written} request(s) to {trace_out}; skipped {skipped} "
               "(no body kept: set ledger_bodies; failed; or a self-hosted target)", err=True)


def _is_ledger(path: str) -> None:
    """Before the trace file is opened for writing (and emptied): sqlite would create a missing ledger and
    answer 'no such table', leaving an empty ledger file and an emptied trace behind."""
    import sqlite3
    from contextlib import closing
    from pathlib import Path

    if not Path(path).is_file():
        raise click.UsageError(f"no ledger at {path} (the ledger_path setting, or --ledger)")
    try:
        with closing(sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)) as db:
            db.execute("SELECT 1 FROM requests LIMIT 1")
    except sqlite3.Error as e:
        raise click.ClickException(f"{path} is not a prefixgate ledger ({e})") from None


@main.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per model, with sources and every price row.")
@click.option("--provider", default=None, help="Only this provider's models (anthropic, openai, gemini, bedrock, vertex, "
                                               "deepseek, openrouter, azure, xai, mistral, groq, fireworks).")
@click.pass_context
def models(ctx: click.Context, as_json: bool, provider: str | None) -> None:
    """Every model the gateway prices and plans: prices (USD per million tokens), caching rules, retirement."""
    import json
    import shutil

    from prefixgate.providers.listing import rows, table
    from prefixgate.providers.rules import RulesError, load_catalog

    settings = _settings(ctx)
    try:
        catalog = load_catalog(settings.providers_file or None)
    except RulesError as e:
        raise click.ClickException(str(e)) from None
    items = rows(catalog, provider)
    if provider and not items:
        raise click.BadParameter(f"no models of provider {provider!r}", param_hint="--provider")
    if as_json:
        click.echo(json.dumps(items, indent=2))
    else:
        click.echo(table(items, shutil.get_terminal_size((100, 24)).columns))


@main.command("mock-providers")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=PORT, default=8200, show_default=True)
@click.option("--faults", "faults_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="YAML or TOML file of standing fault rules (see docs/providers.md); requests can also send x-mock-fault.")
@click.option("--today", default=None, metavar="YYYY-MM-DD", envvar="PREFIXGATE_MOCK_TODAY",
              help="The day models are retired by (refused from their catalogue `retires` date); default: today.")
@click.pass_context
def mock_providers(ctx: click.Context, host: str, port: int, faults_file: str | None, today: str | None) -> None:
    """Serve faithful offline stand-ins for the providers' APIs: Anthropic, OpenAI, Gemini, Bedrock,
    Vertex AI, Azure OpenAI and the OpenAI-compatible ones.

    Point the SDKs (or the gateway's *_base_url settings) here: Anthropic base_url http://HOST:PORT, OpenAI
    http://HOST:PORT/v1, google-genai http_options={"base_url": "http://HOST:PORT"}, Azure OpenAI
    azure_endpoint http://HOST:PORT/azure. Bedrock checks signatures against AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY in this command's environment; Vertex AI takes the token mock-vertex-token.
    Usage comes from the cache simulator (docs/providers.md).
    """
    import uvicorn

    from prefixgate.providers.rules import RulesError, load_catalog
    from prefixgate.simulation.mock.faults import FaultError, FaultPlan
    from prefixgate.simulation.mock.retired import parse_day
    from prefixgate.simulation.mock.server import MockContext, create_app
    from prefixgate.simulation.simulator import Simulator

    settings = _settings(ctx)
    try:
        catalog = load_catalog(settings.providers_file or None)
        plan = FaultPlan.from_file(faults_file) if faults_file else FaultPlan()
        day = parse_day(today, "--today (PREFIXGATE_MOCK_TODAY)") if today else None
    except (RulesError, FaultError, ValueError) as e:
        raise click.ClickException(str(e)) from None
    from prefixgate.clock import clock_for

    app = create_app(MockContext(simulator=Simulator(catalog, entry_visible_after_s=0.0), faults=plan,
                                 clock=clock_for(settings.clock_offset_file), today=day))
    click.echo(f"mock providers on http://{host}:{port} (Anthropic /v1/messages, OpenAI /v1/chat/completions and "
               "/v1/responses, Gemini /v1beta/models/..., Bedrock /model/..., Vertex AI /v1/projects/..., "
               "Azure OpenAI /azure/openai/...)", err=True)
    uvicorn.run(app, host=host, port=port, log_level=settings.log_level)


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to this file instead of standard output.")
@click.option("--fail-on", type=click.Choice(["error", "warning", "info", "never"]), default=None,
              help="Exit 1 when a finding is at or above this severity (default: warning, or the config's).")
@click.option("--enable", "--select", "enable", default=None, help="Only these rules, comma-separated (e.g. PG001,PG004).")
@click.option("--disable", "--ignore", "disable", default=None, help="Skip these rules, comma-separated.")
@click.option("--provider", type=click.Choice(["anthropic", "openai", "gemini"]), default=None,
              help="Provider whose rules apply to templates (request files name their own).")
@click.option("--model", default=None, help="Model whose minimum applies to templates (default claude-sonnet-5-5).")
@click.option("--include", default=None, help="Globs of files to lint in directories, comma-separated.")
@click.option("--exclude", default=None, help="More globs of files to skip in directories, comma-separated.")
@click.option("--pyproject", type=click.Path(dir_okay=False), default=None,
              help="Read [tool.prefixgate.lint] from this file (default: the nearest pyproject.toml).")
@click.option("--fix", is_flag=True, help="Rewrite request files static-first with the planner; print suggested "
              "diffs for templates.")
@click.option("--force-exclude", is_flag=True, help="Apply the include/exclude globs to files named on the "
              "command line too (for pre-commit, which names every changed file).")
@click.option("--cost/--no-cost", default=True, show_default=True,
              help="Estimate the money each rule loses on traces (.jsonl) with the provider simulator.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True)
@click.option("--explain", "explain_code", metavar="CODE", default=None,
              help="Print a rule's documentation (e.g. PG001) and exit.")
@click.option("--stats", is_flag=True, help="Print warnings' precision and recall against the `prefixgate: "
              "expect=PG001` labels in the linted files (exit 0).")
def lint(paths: tuple[str, ...], fmt: str, output: str | None, fail_on: str | None, enable: str | None,
         disable: str | None, provider: str | None, model: str | None, include: str | None, exclude: str | None,
         pyproject: str | None, fix: bool, force_exclude: bool, cost: bool, color: str,
         explain_code: str | None, stats: bool) -> None:
    """Flag prompt shapes that defeat prefix caching, with fixes.

    PATHS are request bodies (.json), traces or request logs (.jsonl), prompt templates (.md, .txt, .j2,
    .prompt) and Python files with prompt templates; directories are searched recursively (default: .).
    Exit status: 0 clean, 1 findings at or above --fail-on, 2 usage error.
    """
    from pathlib import Path

    from prefixgate.cache_planner.lint.config import LintUsageError, apply, find_pyproject, load_config
    from prefixgate.cache_planner.lint.output import render
    from prefixgate.cache_planner.lint.rules import RULES
    from prefixgate.cache_planner.lint.run import lint_paths

    if explain_code is not None:
        from prefixgate.cache_planner.lint.explain import UnknownRule, explain

        try:
            click.echo(explain(explain_code), nl=False)
        except UnknownRule as e:
            click.echo(f"prefixgate lint: error: {e.args[0]}", err=True)
            sys.exit(2)
        sys.exit(0)
    overrides = {k: v for k, v in {"enable": enable, "disable": disable, "provider": provider, "model": model,
                                   "include": include, "exclude": exclude, "fail_on": fail_on}.items() if v is not None}
    try:
        if pyproject is not None and not Path(pyproject).is_file():
            raise LintUsageError(f"--pyproject {pyproject}: no such file")
        config = load_config(Path(pyproject) if pyproject else find_pyproject(Path.cwd()), set(RULES))
        config = apply(config, overrides, set(RULES), "command line")
        if stats:
            from prefixgate.cache_planner.lint.stats import corpus_stats

            click.echo(corpus_stats(list(paths) or ["."], config).table())
            sys.exit(0)
        report = lint_paths(list(paths) or ["."], config, cost=cost, fix=fix, force_exclude=force_exclude)
    except LintUsageError as e:
        click.echo(f"prefixgate lint: error: {e}", err=True)
        sys.exit(2)
    colour = color == "always" or (color == "auto" and output is None and sys.stdout.isatty())
    text = render(report, fmt, colour=colour)
    if output is None:
        click.echo(text, color=colour)
    else:
        try:
            Path(output).write_text(text + "\n", encoding="utf-8")
        except OSError as e:
            click.echo(f"prefixgate lint: error: cannot write {output}: {e.strerror}", err=True)
            sys.exit(2)
    sys.exit(1 if report.fails(config.fail_on) else 0)


@main.command()
@click.argument("which", type=click.Choice(["engine", "planner", "gateway"]), default="engine")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def bench(which: str, args: tuple[str, ...]) -> None:
    """Run a side-by-side benchmark from bench/ (a source checkout); extra ARGS go to the script."""
    import subprocess
    from pathlib import Path

    # The benchmarks compare against peers (transformers, LiteLLM) and ship with the source, not the wheel.
    script = Path(__file__).resolve().parent.parent / "bench" / f"{which}.py"
    if not script.is_file():
        raise click.ClickException(f"bench/{which}.py not found: benchmarks run from a source checkout of prefixgate")
    sys.exit(subprocess.call([sys.executable, str(script), *args]))


@main.group()
def alerts() -> None:
    """Pushed alerts: webhook destinations and the rules that fire them (docs/alerts.md)."""


def _alerting(ctx: click.Context):  # -> (Settings, Alerting)
    from prefixgate.policies import PolicyError, load_policy

    settings = _settings(ctx)
    try:
        policy = load_policy(settings)
    except PolicyError as e:
        raise click.UsageError(str(e)) from None      # it names the policy file itself
    return settings, policy.alerting.with_urls(settings.alert_webhooks)


@alerts.command("test")
@click.pass_context
def alerts_test(ctx: click.Context) -> None:
    """Send one test alert to every destination; exit 1 naming each that did not take it."""
    from prefixgate.gateway.webhooks import try_every

    _, alerting = _alerting(ctx)
    if not alerting.destinations:
        raise click.ClickException("no alert destinations: set alert_webhooks in the policy or PREFIXGATE_ALERT_WEBHOOKS")
    results = try_every(alerting.destinations, alerting.settings)
    for i, (dest, failure) in enumerate(results.items()):
        click.echo(f"#{i} {dest.shown} ({dest.format}): {'delivered' if failure is None else 'FAILED: ' + failure}")
    dead = [f"#{i} {d.shown}" for i, (d, failure) in enumerate(results.items()) if failure is not None]
    if dead:
        raise click.ClickException(f"{len(dead)} of {len(results)} destination(s) did not take the test alert: "
                                   f"{', '.join(dead)}")


@alerts.command("list")
@click.option("--ledger", "ledger_path", type=click.Path(dir_okay=False), default=None,
              help="The ledger file holding the last firings (default: the ledger_path setting).")
@click.pass_context
def alerts_list(ctx: click.Context, ledger_path: str | None) -> None:
    """The alert rules, their thresholds, destinations, and when each last fired."""
    import sqlite3
    from dataclasses import asdict
    from datetime import UTC, datetime

    from prefixgate.gateway.dashboard.alert_rules import RULES
    from prefixgate.gateway.dashboard.alerter import last_firings

    settings, alerting = _alerting(ctx)
    click.echo("destinations: " + (", ".join(f"{d.shown} ({d.format})" for d in alerting.destinations) or "none"))
    click.echo("settings: " + ", ".join(f"{k}={v:g}" for k, v in asdict(alerting.settings).items()))
    if alerting.budget:
        b = alerting.budget
        click.echo(f"gateway budget: ${b.usd:g} per {b.period}" + (f", soft at {b.warn_at:.0%}" if b.warn_at else ""))
    path = ledger_path or settings.ledger_path
    try:
        firings = last_firings(path) if path != ":memory:" and os.path.exists(path) else []
    except sqlite3.Error as e:
        raise click.ClickException(f"cannot read the last firings from {path}: {e}") from None
    last: dict[str, tuple[str, float, str]] = {}
    for rule, subject, ts, text in firings:
        last.setdefault(rule, (subject, ts, text))
    for rule, what in RULES.items():
        fired = last.get(rule)
        when = (f"last fired {datetime.fromtimestamp(fired[1], UTC):%Y-%m-%d %H:%M:%S} UTC on {fired[0]}: {fired[2]}"
                if fired else "never fired")
        click.echo(f"{rule:22} {what}\n{'':22} {when}")


if __name__ == "__main__":
    main()
