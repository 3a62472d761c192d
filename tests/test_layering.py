"""The import direction of docs/contributing.md, kept true by reading every module's imports."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE_ALLOWED = {"__future__", "pydantic", "pydantic_core", "agentq"}  # pydantic_core: pydantic's errors
IO_MODULES = {"sqlalchemy", "celery", "kombu", "flask", "redis", "fakeredis", "psycopg",
              "alembic", "openai", "anthropic", "httpx", "requests", "socket", "os",
              "subprocess", "threading", "time", "random"}
CLOCK_AND_CHANCE = {"now", "utcnow", "today", "uuid1", "uuid4", "random", "randint", "choice",
                    "time", "monotonic", "perf_counter", "urandom", "getrandbits"}


def imported_roots(path: Path) -> set[str]:
    """Top-level names of every module `path` imports (absolute imports only)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module)
    return roots


def modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def importers_of(package: str) -> set[str]:
    found = set()
    for path in modules("agentq"):
        if any(name == package or name.startswith(package + ".") for name in imported_roots(path)):
            found.add(path.relative_to(ROOT).as_posix())
    return found


def impure_imports(path: Path, ours: tuple[str, ...]) -> list[str]:
    """What `path` imports beyond the standard library, pydantic and the packages `ours`,
    each with the reason it is refused."""
    refused = []
    for name in sorted(imported_roots(path)):
        root = name.split(".")[0]
        if name.startswith("agentq."):
            if not any(name == p or name.startswith(p + ".") for p in ours):
                refused.append(f"{name}, outside {', '.join(ours)}")
        elif root in IO_MODULES:
            refused.append(f"{name}, which does I/O")
        elif not (root in PURE_ALLOWED or _is_stdlib(root)):
            refused.append(name)
    return refused


@pytest.mark.parametrize("path", modules("agentq/core"), ids=lambda p: p.name)
def test_the_core_imports_only_the_standard_library_pydantic_and_itself(path):
    refused = impure_imports(path, ("agentq.core",))
    assert not refused, f"{path.name} imports {refused}"


# The HTTP contract: the server validates with it and the SDK reads answers with it, so it
# imports no more than the core does (and the core), never the server a client must not need.
@pytest.mark.parametrize("path", modules("agentq/api"), ids=lambda p: p.name)
def test_the_api_models_import_only_the_standard_library_pydantic_the_core_and_themselves(path):
    refused = impure_imports(path, ("agentq.api", "agentq.core"))
    assert not refused, f"{path.name} imports {refused}"


def test_the_purity_check_refuses_the_server_io_and_a_third_party_package(tmp_path):
    module = tmp_path / "models.py"
    module.write_text("import re\nfrom pydantic import BaseModel\nfrom agentq.core.events import Event\n"
                      "from agentq.api.common import Token\n")
    assert impure_imports(module, ("agentq.api", "agentq.core")) == []
    module.write_text("def answer():\n    from agentq.web.errors import ApiError\n    import os\n"
                      "    import yaml\n")
    assert impure_imports(module, ("agentq.api", "agentq.core")) == [
        "agentq.web.errors, outside agentq.api, agentq.core", "os, which does I/O", "yaml"]
    assert impure_imports(module, ("agentq.web",)) == ["os, which does I/O", "yaml"]


def _is_stdlib(root: str) -> bool:
    import sys

    return root in sys.stdlib_module_names


def test_only_the_store_imports_sqlalchemy_and_alembic():
    allowed_prefix = "agentq/store/"
    for package in ("sqlalchemy", "alembic", "psycopg"):
        offenders = {p for p in importers_of(package) if not p.startswith(allowed_prefix)}
        assert not offenders, f"{package} imported outside the store: {offenders}"


def test_only_the_worker_package_imports_celery_and_kombu():
    for package in ("celery", "kombu"):
        offenders = {p for p in importers_of(package) if not p.startswith("agentq/worker/")}
        assert not offenders, f"{package} imported outside the worker: {offenders}"


# Each provider SDK stays inside the adapter modules of its API: the rest of
# agentq sees only ProviderError, never an SDK type.
SDK_ADAPTERS = {
    "openai": {"agentq/providers/openai_chat.py", "agentq/providers/openai_responses.py",
               "agentq/providers/openai_errors.py"},
    "anthropic": {"agentq/providers/anthropic.py", "agentq/providers/anthropic_errors.py"},
}


@pytest.mark.parametrize("sdk", sorted(SDK_ADAPTERS))
def test_each_provider_sdk_is_imported_only_by_its_adapter_modules(sdk):
    offenders = importers_of(sdk) - SDK_ADAPTERS[sdk]
    assert not offenders, f"{sdk} imported outside its adapter: {sorted(offenders)}"


def test_only_the_mcp_adapter_imports_the_mcp_sdk():
    for package in ("mcp", "mcp_types"):
        offenders = {p for p in importers_of(package) if not p.startswith("agentq/mcp/")}
        assert not offenders, f"{package} imported outside agentq/mcp: {sorted(offenders)}"


def test_the_sdk_check_sees_an_import_anywhere_in_a_module(tmp_path):
    module = tmp_path / "retry.py"
    module.write_text("def classify(exc):\n    import openai\n    from anthropic import APIError\n")
    assert {"openai", "anthropic"} <= imported_roots(module)


def test_only_the_metrics_endpoint_imports_prometheus_client():
    assert importers_of("prometheus_client") <= {"agentq/web/routes/metrics.py"}


def test_only_the_telemetry_package_imports_opentelemetry():
    offenders = {p for p in importers_of("opentelemetry") if not p.startswith("agentq/telemetry/")}
    assert not offenders, f"opentelemetry imported outside agentq/telemetry: {sorted(offenders)}"


def test_only_web_imports_flask():
    offenders = {p for p in importers_of("flask") if not p.startswith("agentq/web/")}
    assert not offenders, offenders


def test_the_core_does_not_import_the_shell():
    for path in modules("agentq/core"):
        for name in imported_roots(path):
            assert not name.startswith(("agentq.store", "agentq.runtime", "agentq.worker")), (
                f"{path.name} imports {name}"
            )


@pytest.mark.parametrize("path", modules("agentq/core"), ids=lambda p: p.name)
def test_the_core_reads_no_clock_and_draws_no_chance(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            assert name not in CLOCK_AND_CHANCE, f"{path.name} calls {name}() at line {node.lineno}"


API_CLIENTS = ("agentq/cli/chat.py", "agentq/cli/timeline.py")
SDK_ALLOWED = ("agentq.client", "agentq.errors", "agentq.api", "httpx2", "pydantic")


@pytest.mark.parametrize("path", modules("agentq/client"), ids=lambda p: p.name)
def test_the_sdk_imports_the_apis_models_and_nothing_of_the_server(path):
    for name in imported_roots(path):
        if name.startswith("agentq") or not _is_stdlib(name.split(".")[0]):
            assert any(name == a or name.startswith(a + ".") for a in SDK_ALLOWED), (
                f"{path.name} imports {name}"
            )


def test_no_module_of_the_sdk_imports_the_server_not_even_for_type_hints():
    graph = import_graph()
    offenders = sorted(f"{module} imports {imported}" for module, imports in graph.items()
                       if package_of(module) == "agentq.client"
                       for imported in imports if package_of(imported) == "agentq.web")
    assert not offenders, "\n".join(offenders)


# What `import agentq.client` may load: the SDK, the API's models, the core they are made of
# and the error root, nothing of the server, the runtime or their libraries. `agentq/__init__`
# imports its public names lazily for this.
SDK_LOADS = ("agentq.client", "agentq.api", "agentq.core", "agentq.errors")
SDK_NEVER_LOADS = ("agentq.agents", "agentq.tools", "agentq.providers", "agentq.web", "agentq.store",
                   "agentq.runtime", "agentq.worker", "agentq.commands", "flask", "sqlalchemy",
                   "celery", "kombu", "redis", "openai", "anthropic")
PRINT_MODULES = "import sys, {imported}; print(' '.join(sorted(sys.modules)))"


def modules_loaded_by(imported: str) -> set[str]:
    """The modules a fresh interpreter holds after `import <imported>`."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", PRINT_MODULES.format(imported=imported)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return set(run.stdout.split())


def test_importing_the_sdk_loads_the_sdk_and_the_api_models_and_nothing_of_the_server():
    loaded = modules_loaded_by("agentq.client")
    ours = sorted(name for name in loaded if name.startswith("agentq."))
    beyond = [name for name in ours if not name.startswith(tuple(p + "." for p in SDK_LOADS))
              and name not in SDK_LOADS]
    assert not beyond, f"import agentq.client loads {beyond}"
    never = sorted(name for name in loaded if name.split(".")[0] in SDK_NEVER_LOADS
                   or package_of(name) in SDK_NEVER_LOADS)
    assert not never, f"import agentq.client loads {never}"
    assert len(ours) <= 40, f"import agentq.client loads {len(ours)} modules of agentq: {ours}"


def test_the_load_check_sees_what_the_public_surface_imports_when_it_is_used():
    assert {"agentq.tools", "agentq.agents"} <= modules_loaded_by("agentq; agentq.tool, agentq.agent")
    assert "agentq.tools" not in modules_loaded_by("agentq")


@pytest.mark.parametrize("name", API_CLIENTS)
def test_the_terminal_commands_are_clients_of_the_http_api_only(name):
    inside = ("agentq.store", "agentq.runtime", "agentq.worker", "agentq.commands", "agentq.web",
              "sqlalchemy", "celery", "flask", "redis")
    for imported in imported_roots(ROOT / name):
        assert not any(imported == i or imported.startswith(i + ".") for i in inside), (
            f"{name} imports {imported}"
        )
    if name == "agentq/cli/timeline.py":  # pure formatting, no I/O
        assert not {i.split(".")[0] for i in imported_roots(ROOT / name)} & IO_MODULES


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, ours: set[str]) -> set[str]:
    """Modules of `ours` that `path` imports anywhere: at the top, in a function, for types only."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return imports_in(path.read_text(), package, ours)


def imports_in(source: str, package: str, ours: set[str]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, one level up per extra dot
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # `from package import module` imports the module
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in ours else base)
    return found & ours


@functools.cache
def import_graph() -> dict[str, frozenset[str]]:
    paths = modules("agentq")
    ours = {module_name(path) for path in paths}
    return {module_name(path): frozenset(imported_modules(path, ours) - {module_name(path)})
            for path in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as a path that ends where it starts, or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return path[path.index(name):] + [name]
        if name in done:
            return None
        path.append(name)
        for imported in sorted(graph[name]):
            if (cycle := visit(imported)) is not None:
                return cycle
        path.pop()
        done.add(name)
        return None

    return next((cycle for name in sorted(graph) if (cycle := visit(name))), None)


def test_the_import_graph_of_agentq_has_no_cycle_not_even_for_type_hints():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_sees_a_cycle_and_an_import_made_for_type_hints_only():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agentq.x import Y\n"
    assert imports_in(source, "agentq", {"agentq.x", "agentq.y"}) == {"agentq.x"}
    assert imports_in("from . import y\n", "agentq", {"agentq.x", "agentq.y"}) == {"agentq.y"}


RUNTIME_PARTS = [p for p in modules("agentq/runtime") if p.name not in ("__init__.py", "runtime.py")]


@pytest.mark.parametrize("path", RUNTIME_PARTS, ids=lambda p: p.name)
def test_the_parts_of_the_runtime_take_a_narrow_context_not_the_runtime_that_wires_them(path):
    assert not imported_roots(path) & {"agentq.runtime", "agentq.runtime.runtime"}, path.name


def imports_the_whole_store(source: str) -> bool:
    """True if the module imports `Store`, the holder of every role, not the roles it reads."""
    return any(isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentq.store")
               and any(alias.name == "Store" for alias in node.names)
               for node in ast.walk(ast.parse(source)))


@pytest.mark.parametrize("path", modules("agentq/web/streaming"), ids=lambda p: p.name)
def test_the_streams_read_the_roles_of_the_store_they_use_not_the_whole_store(path):
    assert not imports_the_whole_store(path.read_text()), path.name


def test_the_whole_store_check_sees_store_and_lets_a_role_be():
    assert imports_the_whole_store("def f():\n    from agentq.store import ConversationInfo, Store\n")
    assert not imports_the_whole_store("from agentq.store.log import EventLog\n")


# ---- packages ------------------------------------------------------------------------------
# The roles of agentq, lowest first. A package imports the packages of its own layer or of
# the layers below it, never above; with no cycle between packages, that makes every import
# run one way: core <- shared vocabulary <- adapters <- commands, runtime <- the processes.
LAYERS = (
    {"agentq.core"},
    {"agentq.errors", "agentq.config", "agentq.followups", "agentq.telemetry", "agentq.api"},
    {"agentq.process", "agentq.store", "agentq.providers", "agentq.tools", "agentq.live",
     "agentq.tenancy", "agentq.agents", "agentq.webhooks", "agentq.mcp"},
    {"agentq.commands", "agentq.runtime"},
    {"agentq.worker", "agentq.web", "agentq.cli", "agentq.client"},
)
PUBLIC_SURFACE = "agentq"  # agentq/__init__.py re-exports from any layer


def package_of(module: str) -> str:
    """The role a module belongs to: `agentq.store.ledger` -> `agentq.store`."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]], package=package_of) -> dict[str, set[str]]:
    """`graph` with each module replaced by its package, and imports within a package dropped."""
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        edges = packages.setdefault(package(module), set())
        edges.update(package(i) for i in imported)
    return {name: edges - {name} for name, edges in packages.items()}


def layer_of(package: str) -> int:
    return next(n for n, layer in enumerate(LAYERS) if package in layer)


def test_every_package_of_agentq_has_a_layer():
    unplaced = set(package_graph(import_graph())) - set().union(*LAYERS) - {PUBLIC_SURFACE}
    assert not unplaced, f"packages without a layer in LAYERS: {sorted(unplaced)}"


def test_the_packages_of_agentq_import_each_other_without_a_cycle():
    cycle = find_cycle(package_graph(import_graph()))
    assert cycle is None, "package import cycle: " + " -> ".join(cycle)


def test_no_package_imports_a_package_of_a_layer_above_its_own():
    graph = import_graph()
    upward = sorted(
        f"{module} imports {imported}"
        for module, imports in graph.items() if package_of(module) != PUBLIC_SURFACE
        for imported in imports
        if layer_of(package_of(imported)) > layer_of(package_of(module)))
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_the_subpackages_of_each_package_import_each_other_without_a_cycle():
    graph = {m: i for m, i in import_graph().items() if m.count(".") >= 3}

    def subpackage(module: str) -> str:
        return ".".join(module.split(".")[:3])

    inner = {m: {i for i in imports if i.count(".") >= 3} for m, imports in graph.items()}
    cycle = find_cycle(package_graph(inner, subpackage))
    assert cycle is None, "subpackage import cycle: " + " -> ".join(cycle)


def test_the_contributing_guide_names_every_package_in_its_import_direction():
    guide = (ROOT / "docs/contributing.md").read_text()
    unnamed = sorted(p for layer in LAYERS for p in layer if f"`{p.removeprefix('agentq.')}`" not in guide)
    assert not unnamed, f"docs/contributing.md's import direction leaves out {unnamed}"


def test_the_package_checks_see_an_import_across_packages_and_against_the_layers():
    graph = {"agentq.store.ledger": {"agentq.core.keys", "agentq.runtime.turns"},
             "agentq.runtime.turns": {"agentq.store.ledger"}, "agentq.core.keys": set()}
    packages = package_graph(graph)
    assert packages == {"agentq.store": {"agentq.core", "agentq.runtime"},
                        "agentq.runtime": {"agentq.store"}, "agentq.core": set()}
    assert find_cycle(packages) == ["agentq.runtime", "agentq.store", "agentq.runtime"]
    assert layer_of("agentq.runtime") > layer_of("agentq.store")


def test_every_module_says_what_it_is_for_in_a_docstring():
    missing = [path.relative_to(ROOT).as_posix() for path in modules("agentq")
               if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()]
    assert not missing, f"modules without a docstring: {missing}"


# ---- dispatch -------------------------------------------------------------------------------
# An attribute is named in the code, or looked up in a mapping; never built from strings
# (`getattr(board, "load_" + what)`): "go to definition" cannot follow a name that is built.
ATTRIBUTE_BUILTINS = {"getattr", "setattr", "hasattr", "delattr"}


def built_attribute_names(source: str) -> list[int]:
    """The lines of `source` that look an attribute up by a name built from strings."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ATTRIBUTE_BUILTINS and len(node.args) >= 2
                and _is_built_string(node.args[1])):
            lines.append(node.lineno)
    return lines


def _is_built_string(node: ast.expr) -> bool:
    if isinstance(node, ast.JoinedStr | ast.BinOp):  # f"{x}_y", "x_" + y, "x_%s" % y
        return True
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("format", "join"))


def test_no_attribute_is_looked_up_by_a_name_built_from_strings():
    built = {path.relative_to(ROOT).as_posix(): lines for path in modules("agentq")
             if (lines := built_attribute_names(path.read_text()))}
    assert not built, f"attribute names built from strings (module: lines): {built}"


def test_the_dispatch_check_sees_a_built_name_and_lets_a_plain_one_be():
    assert built_attribute_names('getattr(m, "before_" + name)\n') == [1]
    assert built_attribute_names('x = 1\ngetattr(m, f"{kind}_tokens")\n') == [2]
    assert built_attribute_names('setattr(m, "on_{}".format(name), 1)\n') == [1]
    assert built_attribute_names('getattr(m, "name")\ngetattr(record, name, None)\n') == []


# ---- the entry point ------------------------------------------------------------------------
# gevent must patch `agentq api` and `agentq dev` before their modules load: the entry point
# imports only the patch, and loads the program after it, so no import waits on a line of code.
ENTRY_POINT_IMPORTS = {"__future__", "sys", "collections.abc", "agentq.process.cooperative"}


def test_the_entry_point_imports_only_the_gevent_patch_before_it_runs():
    tree = ast.parse((ROOT / "agentq/cli/main.py").read_text())
    top = {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top |= {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert top <= ENTRY_POINT_IMPORTS, f"agentq/cli/main.py imports {sorted(top - ENTRY_POINT_IMPORTS)}"


def test_no_module_orders_its_imports_around_code():
    ordered = [path.relative_to(ROOT).as_posix() for path in modules("agentq")
               if "noqa: E402" in path.read_text()]
    assert not ordered, f"imports after code (noqa: E402) in {ordered}"


# The import direction as docs/contributing.md and docs/architecture.md state it, layer by
# layer between the arrows: each page names every package of LAYERS, in its layer.
DIRECTION_PAGES = ("docs/contributing.md", "docs/architecture.md")


def documented_layers(text: str) -> list[set[str]]:
    """The packages between the arrows of the sentence that starts at "`core` ←", by layer."""
    start = text.index("`core` ←")
    sentence = re.split(r"\)|\.\s", text[start:], maxsplit=1)[0]
    return [{f"agentq.{name}" for name in re.findall(r"`([a-z_]+)`", group)}
            for group in sentence.split("←")]


def missing_from_the_direction(layers: list[set[str]]) -> list[str]:
    return sorted(package for n, layer in enumerate(LAYERS) for package in layer
                  if n >= len(layers) or package not in layers[n])


@pytest.mark.parametrize("page", DIRECTION_PAGES)
def test_the_documented_import_direction_names_every_package_in_its_layer(page):
    missing = missing_from_the_direction(documented_layers((ROOT / page).read_text()))
    assert not missing, f"{page}: the import direction leaves out or misplaces {missing}"


def test_the_direction_check_sees_a_package_left_out_or_in_the_wrong_layer():
    text = "Imports (`core` ← `api`, `errors`, `config`, `followups`, `telemetry` ← `store`) form"
    layers = documented_layers(text)
    assert layers == [{"agentq.core"}, {"agentq.api", "agentq.errors", "agentq.config",
                                        "agentq.followups", "agentq.telemetry"}, {"agentq.store"}]
    assert "agentq.store" not in missing_from_the_direction(layers)
    assert {"agentq.tools", "agentq.client"} <= set(missing_from_the_direction(layers))
    moved = [{"agentq.core", "agentq.api"}, layers[1] - {"agentq.api"}, *layers[2:]]
    assert "agentq.api" in missing_from_the_direction(moved)


# ---- seams ---------------------------------------------------------------------------------
# The runtime is built from a handful of named objects (agentq/runtime/seams.py): a
# new need of a step goes into one of them (the tenant rules, the announcer, the config),
# not into one more callable handed to Runtime.
MAX_RUNTIME_PARAMETERS = 7


def parameters_of(source: str, cls: str, method: str = "__init__") -> list[str]:
    """The names `cls.method` in `source` takes, `self` left out."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    args = item.args
                    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
                    every += [a for a in (args.vararg, args.kwarg) if a is not None]
                    return [a.arg for a in every if a.arg != "self"]
    raise AssertionError(f"no {cls}.{method} in the source")


def test_the_runtime_is_built_from_at_most_seven_objects():
    taken = parameters_of((ROOT / "agentq/runtime/runtime.py").read_text(), "Runtime")
    assert len(taken) <= MAX_RUNTIME_PARAMETERS, (
        f"Runtime.__init__ takes {len(taken)} parameters: {taken}")


def test_the_parameter_count_sees_every_kind_of_parameter():
    source = "class R:\n    def __init__(self, a, /, b, *c, d, **e):\n        pass\n"
    assert parameters_of(source, "R") == ["a", "b", "d", "c", "e"]
    assert len(parameters_of(source, "R")) > 4


# Where PostgreSQL and SQLite differ is said once, by a Dialect (agentq/store/dialects/):
# nothing else tells the databases apart by name.
DIALECT_BY_NAME = re.compile(r"dialect\.name\b|dialect_name\b|==\s*[\"'](postgresql|sqlite)[\"']")


def dialect_tests_in(source: str) -> list[int]:
    """The numbers of the lines of `source` that test a dialect by its name."""
    return [n for n, line in enumerate(source.splitlines(), 1) if DIALECT_BY_NAME.search(line)]


def test_only_the_dialects_tell_postgresql_and_sqlite_apart_by_name():
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in modules("agentq")
                 if "store/dialects" not in path.as_posix()
                 for n in dialect_tests_in(path.read_text())]
    assert not offenders, f"the dialect tested by name outside agentq/store/dialects: {offenders}"


def test_the_dialect_check_sees_each_way_of_testing_a_name():
    source = ('if conn.dialect.name == "postgresql":\n'
              "module = pg if dialect_name == 'sqlite' else lite\n"
              'if engine.name == "postgresql": pass\n'
              "return dialects.of(conn).running_state\n")
    assert dialect_tests_in(source) == [1, 2, 3]


# A class with more verbs than this is a facade of several things (the store was one class
# of 89 methods, assembled from ten mixins): split it by role instead.
MAX_PUBLIC_METHODS = 30
# The SDK's clients hold one method per operation of the HTTP API, declared once for both
# in agentq/client/calls.py and kept in step with the API by a test: their size is the API's.
WIDE_CLASSES = {"agentq/client/sync.py:Client", "agentq/client/aio.py:AsyncClient"}


def public_methods(sources: dict[str, str]) -> dict[str, set[str]]:
    """Per `path:Class`, its public methods, with those of its bases defined in `sources`."""
    own: dict[str, tuple[str, set[str], list[str]]] = {}
    for path, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                names = {item.name for item in node.body
                         if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                         and not item.name.startswith("_")}
                bases = [base.id for base in node.bases if isinstance(base, ast.Name)]
                own[f"{path}:{node.name}"] = (node.name, names, bases)
    by_name = {name: methods_and_bases for name, *methods_and_bases in own.values()}

    def inherited(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if name not in by_name or name in seen:
            return set()
        methods, bases = by_name[name]
        return methods.union(*(inherited(base, seen | {name}) for base in bases))

    return {key: names | set().union(*(inherited(b) for b in bases))
            for key, (_, names, bases) in own.items()}


def test_no_class_of_agentq_has_more_than_thirty_public_methods():
    sources = {path.relative_to(ROOT).as_posix(): path.read_text() for path in modules("agentq")}
    wide = {key: len(names) for key, names in public_methods(sources).items()
            if len(names) > MAX_PUBLIC_METHODS and key not in WIDE_CLASSES}
    assert not wide, f"classes with more than {MAX_PUBLIC_METHODS} public methods: {wide}"


def test_the_method_count_sees_methods_a_class_takes_from_its_mixins():
    verbs = "".join(f"    def verb_{i}(self): ...\n" for i in range(20))
    source = (f"class A:\n{verbs}\nclass B:\n{verbs.replace('verb', 'other')}\n"
              "class Facade(A, B):\n    def own(self): ...\n    def _private(self): ...\n")
    assert len(public_methods({"m.py": source})["m.py:Facade"]) == 41


# Modules of the store stay readable in one sitting: split one that grows past this by idea.
MAX_STORE_MODULE_LINES = 400


def test_no_module_of_the_store_is_longer_than_four_hundred_lines():
    long = {path.relative_to(ROOT).as_posix(): length for path in modules("agentq/store")
            if (length := len(path.read_text().splitlines())) > MAX_STORE_MODULE_LINES}
    assert not long, f"store modules over {MAX_STORE_MODULE_LINES} lines: {long}"
