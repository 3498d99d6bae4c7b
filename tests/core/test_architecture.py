"""The dependency map of ARCHITECTURE.md, read from the source with `ast` so it stays true:

- provider knowledge lives in the dialect adapters, the upstream kind records (policies/kinds.py), the
  catalogue (prefixgate/providers/); at most three gateway modules may name a provider (today two endpoint
  modules: model listing in each provider's shape, and Vertex's publisher paths);
- the core package imports neither the gateway, the simulated world nor the CLI (the floors above it).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROVIDERS = ("anthropic", "openai", "gemini", "bedrock", "vertex", "azure")
# The gateway modules that may name a provider: at most three (issue 35).
NAMES_PROVIDERS = {"endpoints_models.py", "endpoints_vertex.py"}


def names_a_provider(value: str) -> bool:
    """A provider's name, or a kind or format named after one (openai_compatible, vertex_gemini, anthropic/...)."""
    return any(value == p or value.startswith((f"{p}_", f"{p}/", f"{p}.")) for p in PROVIDERS)


def modules_naming_providers(folder: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        hits = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                and isinstance(node.value, str) and id(node) not in docstrings and names_a_provider(node.value)]
        if hits:
            out[str(path.relative_to(folder))] = sorted(set(hits))
    return out


def test_no_more_than_three_gateway_modules_name_a_provider() -> None:
    naming = modules_naming_providers(ROOT / "gateway")
    others = {m: names for m, names in naming.items() if m not in NAMES_PROVIDERS}
    assert len(NAMES_PROVIDERS) <= 3
    assert not others, f"gateway modules naming a provider outside the adapters and kind records: {others}"


def test_the_provider_check_sees_a_provider_name(tmp_path: Path) -> None:
    # The check itself: a branch on a kind, format or provider name is seen; a docstring or a sentence is not.
    (tmp_path / "branches.py").write_text('"""Talks to anthropic."""\nif kind == "openai_compatible":\n    x = 1\n')
    (tmp_path / "prose.py").write_text('"""Talks to anthropic."""\nmessage = "openai-compatible servers"\n')
    assert modules_naming_providers(tmp_path) == {"branches.py": ["openai_compatible"]}


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function (a lazy import is still an arrow)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


ABOVE_CORE = ("prefixgate.gateway", "prefixgate.simulation", "prefixgate.cli")


def upward_imports(core: Path, above: tuple[str, ...] = ABOVE_CORE) -> dict[str, list[str]]:
    out = {}
    for path in sorted(core.rglob("*.py")):
        if "simulation" in path.relative_to(core).parts:
            continue
        wrong = sorted(m for m in imports_of(path) if m.startswith(above) and m.split(".")[:2] in
                       [a.split(".") for a in above])
        if wrong:
            out[str(path.relative_to(core))] = wrong
    return out


def test_core_imports_neither_gateway_simulation_nor_cli() -> None:
    assert (ROOT / "prefixgate" / "simulation").is_dir() and (ROOT / "cli" / "__init__.py").is_file()
    assert not upward_imports(ROOT / "prefixgate")


def test_the_import_check_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    (tmp_path / "low.py").write_text("def f():\n    from prefixgate.simulation.simulator import Simulator\n")
    (tmp_path / "fine.py").write_text("from prefixgate.providers import rules\nimport prefixgate.gatewayish\n")
    assert upward_imports(tmp_path) == {"low.py": ["prefixgate.simulation.simulator",
                                                   "prefixgate.simulation.simulator.Simulator"]}


def runtime_imports(path: Path) -> set[str]:
    """The modules `path` imports outside `if TYPE_CHECKING:` blocks (annotations are no arrow at run time)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def test_accounting_and_the_relay_never_call_back_into_the_proxy() -> None:
    # The proxy orchestrates; recording and pricing a finished request is gateway/accounting.py's, which the
    # relay and the proxy call.
    for module in ("accounting.py", "relay.py", "response_cache.py"):
        assert "prefixgate.gateway.proxy" not in runtime_imports(ROOT / "gateway" / module), module
    assert "prefixgate.gateway.accounting" in runtime_imports(ROOT / "gateway" / "relay.py")


def test_provider_facts_import_no_format_and_no_simulation() -> None:
    # Facts (rules, prices, catalogue, profiles) sit below the formats and the simulated world that read them.
    assert not upward_imports(ROOT / "prefixgate" / "providers", ("prefixgate.dialects", "prefixgate.simulation"))
