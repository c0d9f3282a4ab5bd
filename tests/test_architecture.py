"""Imports point one way: ledger <- policies <- projections <- pipeline.

Only ``ledger/`` imports eventsourcing; ``policies/`` is pure (no I/O, clock,
randomness, logging or concurrency modules); nothing imports ``pipeline``.
Every layer is imported under the one ``turnledger`` namespace, never by its
bare folder name.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAMESPACE = "turnledger"
PACKAGES = ("ledger", "policies", "projections", "pipeline", "adapters")
# pipeline and adapters are both shells on top; neither imports the other.
LAYER = {"ledger": 0, "policies": 1, "projections": 2, "pipeline": 3, "adapters": 3}
FRAMEWORK_ONLY_IN_LEDGER = {"eventsourcing"}
POLICY_IMPURE = {
    "os",
    "io",
    "time",
    "random",
    "secrets",
    "logging",
    "asyncio",
    "socket",
    "subprocess",
    "sqlite3",
    "threading",
    "multiprocessing",
    "shutil",
    "tempfile",
    "structlog",
    "aiosqlite",
    "psycopg",
    "httpx",
    "urllib",
    "http",
    "glob",
}
# What policies may see of the ledger: its value types, never the store.
LEDGER_TYPES = {
    "ledger",
    "ledger.events",
    "ledger.envelope",
    "ledger.errors",
    "ledger.ids",
}
# Folders whose Python files must import the layers by their namespaced names.
CLIENT_FOLDERS = ("tests", "benchmarks", "examples")


def _package_folder(package: str) -> Path:
    """Where ``turnledger.<package>`` is imported from: the source folder in an
    editable install, ``site-packages`` in a wheel or sdist install."""
    spec = importlib.util.find_spec(f"{NAMESPACE}.{package}")
    assert spec is not None, f"{NAMESPACE}.{package} is not importable"
    assert spec.submodule_search_locations, f"{NAMESPACE}.{package} is no package"
    return Path(next(iter(spec.submodule_search_locations)))


def modules() -> list[tuple[str, Path]]:
    """Every module of the five layers, named without the namespace
    (``pipeline.engine.opening``), found where the package is imported from."""
    found = []
    for package in PACKAGES:
        folder = _package_folder(package)
        for path in sorted(folder.rglob("*.py")):
            parts = (package, *path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((".".join(parts), path))
    return found


def layer_of(target: str) -> str | None:
    """Return the layer a namespaced import names (``turnledger.ledger.x``)."""
    parts = target.split(".")
    if parts[0] == NAMESPACE and len(parts) > 1 and parts[1] in LAYER:
        return parts[1]
    return None


def imports_of(module: str, path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                is_package = path.name == "__init__.py"
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join([NAMESPACE, *base])
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            names.append(target)
    return names


MODULES = modules()
# The five layers held 255 modules when this floor was set; a checkout or an
# install the rules cannot read shows as far fewer.
MIN_MODULES = 150


@pytest.mark.parametrize("count", [len(MODULES)], ids=[f"{len(MODULES)} modules"])
def test_the_five_packages_exist_and_are_checked(count: int):
    """The layout the architecture fixes is present, and the rules below read
    every module of it: a layout they cannot find fails here, never passes
    vacuously."""
    for package in PACKAGES:
        folder = _package_folder(package)
        assert (folder / "__init__.py").is_file(), package
        assert (folder / "py.typed").is_file(), package
        assert any(name.startswith(f"{package}.") for name, _ in MODULES), package
    assert count >= MIN_MODULES, f"{count} modules checked"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_imports_point_one_way(module: str, path: Path):
    """A package imports only packages below it; frameworks stay in their layer."""
    layer = module.split(".", maxsplit=1)[0]
    for target in imports_of(module, path):
        top = target.split(".")[0]
        assert top not in LAYER, f"{module} imports {target}: use turnledger.{target}"
        target_layer = layer_of(target)
        if target_layer is not None:
            assert LAYER[target_layer] <= LAYER[layer], (
                f"{module} imports {target} (upward)"
            )
            if LAYER[target_layer] == LAYER[layer]:
                assert target_layer == layer, f"{module} imports {target} (sideways)"
        if top in FRAMEWORK_ONLY_IN_LEDGER:
            assert layer == "ledger", f"{module} imports {target}; only ledger/ may"
        if layer == "policies":
            assert top not in POLICY_IMPURE, f"policy {module} imports impure {target}"
            if target_layer == "ledger":
                bare = target.removeprefix(f"{NAMESPACE}.")
                assert bare in LEDGER_TYPES, f"policy {module} imports {target}"


CLIENTS = [
    path for folder in CLIENT_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
]


@pytest.mark.parametrize(
    "path", CLIENTS, ids=[str(p.relative_to(ROOT)) for p in CLIENTS]
)
def test_clients_import_the_namespace(path: Path):
    """Tests, benchmarks and examples import ``turnledger.<layer>``, never the folder."""
    for target in imports_of("tests.x", path):
        top = target.split(".")[0]
        assert top not in LAYER, (
            f"{path.name} imports {target}: use turnledger.{target}"
        )


SOURCE = (ROOT / "pyproject.toml").is_file()
"""A source checkout (the packaging checks read its files); an installed copy
of these tests checks the installed package alone."""


@pytest.mark.skipif(not SOURCE, reason="no pyproject.toml: an installed copy")
def test_the_distribution_maps_the_folders_without_links():
    """``turnledger.<layer>`` is the folder ``<layer>/`` through setuptools'
    ``package-dir``, every subpackage folder is listed, and the repository holds
    no symbolic link (a clone without links builds the same package)."""
    import tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setup["package-dir"] == {
        NAMESPACE: NAMESPACE,
        **{f"{NAMESPACE}.{package}": package for package in PACKAGES},
    }
    folders = {NAMESPACE} | {
        ".".join((NAMESPACE, *init.parent.relative_to(ROOT).parts))
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
    }
    assert sorted(setup["packages"]) == sorted(folders)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"turnledger": "turnledger.pipeline.cli:main"}
    links = [
        str(path.relative_to(ROOT))
        for folder in (NAMESPACE, *PACKAGES, *CLIENT_FOLDERS, "docs")
        if (ROOT / folder).exists()
        for path in (ROOT / folder).rglob("*")
        if path.is_symlink()
    ]
    assert not links


def test_each_layer_imports_from_one_place():
    """A module of the package is imported from its folder under one name: the
    installed ``turnledger.<layer>`` and the folder are the same files."""
    from turnledger.ledger import events

    folder = _package_folder("ledger")
    assert Path(events.__file__).resolve().parent == (folder / "events").resolve()
    assert "ledger" not in sys.modules
    assert "ledger.events" not in sys.modules


def _import_graph() -> dict[str, set[str]]:
    """Each module's imports of other modules of the package: every import
    statement counts (module level, in a function, under ``TYPE_CHECKING``), and
    importing ``a.b.c`` also runs the packages ``a.b`` and ``a`` above it."""
    known = {name for name, _ in MODULES}
    graph: dict[str, set[str]] = {}
    for module, path in MODULES:
        own_packages = _packages_above(module)
        targets: set[str] = set()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            named: list[str] = []
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    local = submodule.removeprefix(f"{NAMESPACE}.")
                    named.append(submodule if local in known else node.module)
            for name in named:
                local = name.removeprefix(f"{NAMESPACE}.")
                if not name.startswith(f"{NAMESPACE}.") or local not in known:
                    continue
                reached = {local} | (_packages_above(local) - own_packages)
                targets |= (reached & known) - {module}
        graph[module] = targets
    return graph


def _packages_above(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:end]) for end in range(1, len(parts))}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _unit(module: str) -> str:
    """What one-way is checked between: a layer's subpackage or top module."""
    return ".".join(module.split(".")[:2])


def test_no_import_cycles():
    """No module imports itself back, however indirectly (0 cycles)."""
    graph = _import_graph()
    assert sum(len(targets) for targets in graph.values()) > len(MODULES)
    assert _cycles(graph) == []


def test_subpackages_import_one_way():
    """Inside a layer, its subpackages and top modules import one way too."""
    units: dict[str, set[str]] = {}
    for module, targets in _import_graph().items():
        units.setdefault(_unit(module), set()).update(
            _unit(target) for target in targets if _unit(target) != _unit(module)
        )
    assert len(units) > len(PACKAGES)
    assert _cycles(units) == []


def test_the_cycle_rule_sees_a_cycle():
    """The rule finds the cycles it forbids (it can fail)."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_stdlib_table_is_available():
    """The purity check relies on the interpreter's stdlib list."""
    assert "os" in sys.stdlib_module_names


def test_the_cli_needs_no_optional_extra():
    """`pip install .` (no extras) is enough for the CLI: psycopg, qdrant-client and
    sentence-transformers load only when a command needs them."""
    import subprocess

    code = (
        "import sys\n"
        "for name in ('psycopg', 'psycopg_pool', 'qdrant_client', 'sentence_transformers', 'matplotlib'):\n"
        "    sys.modules[name] = None\n"
        "import turnledger.pipeline.cli, turnledger.pipeline.engine\n"
        "import turnledger.projections, turnledger.policies, turnledger.ledger\n"
        "from turnledger.ledger.store import open_store\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


VIEW_WRITERS = {"projections.runner", "projections.views", "projections.views.postgres"}
"""Only the runner (and the view stores themselves) write views."""

# Readers outside projections/ read through the query APIs
# (turnledger.projections.queries, .record, .prompt_history, .lineage ...), not
# by folding events themselves: shell modules import neither the fold machinery
# (turnledger.projections.base) nor a fold function of a projection module. The
# one exception is the engine's session cursor, which folds only the events it
# has just appended itself (the same fold the view runs, continued in memory).
FOLD_ALLOWED = {"pipeline.engine.session_cursor"}
FOLD_NAMES = {"fold", "fold_stream", "exact_history"}
# The web UI and replay are readers only: they do not read session streams
# themselves either (a fork's stream alone is not its session; the query APIs
# compose the lineage).
READERS = ("pipeline.web", "pipeline.timetravel.replay")


def _calls(path: Path) -> list[ast.Call]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_only_the_runner_writes_views(module: str, path: Path):
    """Nothing but the projection runner commits to or resets a view store."""
    if module in VIEW_WRITERS:
        return
    for call in _calls(path):
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in {"commit", "reset"}:
            target = ast.unparse(func.value).lower()
            assert "view" not in target, f"{module} writes a view: {ast.unparse(call)}"


def _imported_names(path: Path) -> list[tuple[str, str]]:
    """``(module, name)`` of every ``from module import name``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        (node.module or "", alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ]


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_readers_use_the_query_apis(module: str, path: Path):
    """Shell modules do not fold the ledger themselves (the query APIs do)."""
    layer = module.split(".", maxsplit=1)[0]
    if layer not in {"pipeline", "adapters"} or module in FOLD_ALLOWED:
        return
    for target in imports_of(module, path):
        assert target != "turnledger.projections.base", (
            f"{module} imports the fold machinery; read through a query API "
            "(turnledger.projections.queries, .record, .prompt_history)"
        )
    for source, name in _imported_names(path):
        if source.startswith(f"{NAMESPACE}.projections"):
            assert name not in FOLD_NAMES, f"{module} imports {source}.{name}"
    if module.startswith(READERS):
        for call in _calls(path):
            func = call.func
            assert not (
                isinstance(func, ast.Attribute) and func.attr == "read_stream"
            ), f"{module} reads a stream itself: {ast.unparse(call)[:60]}"


# A catch-up reads a read model's tracking position (a view's ``tracking``, a
# memory backend's ``applied_position``) and pages the ledger's global log from
# it. The one loop that does is ``projections.runner.catch_up``: every other
# module hands it a tracked target (``ViewTarget``, ``BackendTarget``). Checked
# per module (so a loop split into helpers is still seen): no module but the
# runner both reads a tracking position and reads the global log
# (``read_all`` / ``iter_all``). Reading the log without a tracking position (an
# export, a whole-ledger report) is not a catch-up and is not concerned.
TRACKING_READS = {"applied_position", "tracking"}
LOG_READS = {"read_all", "iter_all"}
CATCH_UP_MODULE = "projections.runner"


def _called_attributes(source: str) -> set[str]:
    return {
        call.func.attr
        for call in ast.walk(ast.parse(source))
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
    }


def _catches_up(source: str) -> bool:
    called = _called_attributes(source)
    return bool(called & TRACKING_READS and called & LOG_READS)


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_only_the_runner_pages_the_ledger_for_catch_up(module: str, path: Path):
    """One catch-up implementation: nothing else reads a position and pages from it."""
    if module == CATCH_UP_MODULE:
        assert _catches_up(path.read_text())
        return
    assert not _catches_up(path.read_text()), (
        f"{module} catches a read model up itself; hand a tracked target to "
        "turnledger.projections.runner.catch_up"
    )


def test_the_catch_up_rule_sees_a_loop_split_into_helpers():
    """The rule fails on the hand-written catch-up it forbids (it can fail)."""
    source = (
        "def catch(store, backend):\n"
        "    for page in _pages(store, backend.applied_position()):\n"
        "        backend.apply(page.events, page.reached)\n"
        "def _pages(store, after):\n"
        "    while page := store.read_all(after=after, limit=500):\n"
        "        yield page\n"
        "        after = page[-1].position\n"
    )
    assert _catches_up(source)
    assert not _catches_up("def export(store):\n    return list(store.iter_all())\n")


# Paging the log by hand is how a second catch-up loop starts: no module but the
# runner (the catch-up loop) and the ledger's own pager (``EventStore.iter_all``)
# calls ``read_all(after=...)`` inside a loop. A whole-ledger or tail read (an
# export, a report) uses ``iter_all``; a read model kept current (a view, a memory
# backend, the budget guard's spend) is a tracked target of ``runner.catch_up``.
PAGERS = {"ledger.store", CATCH_UP_MODULE}


def _paging_loops(source: str) -> list[str]:
    found = []
    for loop in ast.walk(ast.parse(source)):
        if not isinstance(loop, ast.While | ast.For | ast.AsyncFor):
            continue
        found += [
            ast.unparse(call)[:60]
            for call in ast.walk(loop)
            if isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "read_all"
            and any(k.arg == "after" for k in call.keywords)
        ]
    return found


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_only_the_pagers_page_the_log(module: str, path: Path):
    """``read_all(after=...)`` in a loop: the runner and ``iter_all`` only."""
    if module in PAGERS:
        return
    assert not _paging_loops(path.read_text()), (
        f"{module} pages the log itself: use store.iter_all, or hand a tracked "
        "target to turnledger.projections.runner.catch_up"
    )


def test_the_paging_rule_sees_a_hand_written_pager():
    """The rule fails on the loop it forbids (it can fail)."""
    loop = (
        "def scan(store):\n"
        "    after = 0\n"
        "    while page := store.read_all(after=after, limit=500):\n"
        "        after = page[-1].position\n"
    )
    body = (
        "def scan(store, guard):\n"
        "    while guard.position < 9:\n"
        "        page = store.read_all(after=guard.position, limit=9)\n"
        "        guard.position = page[-1].position\n"
    )
    assert _paging_loops(loop)
    assert _paging_loops(body)
    assert not _paging_loops("def tail(store):\n    return store.read_all(after=3)\n")


# One composition root: the engine is built by ``pipeline/bootstrap.py`` alone,
# for every entry point (the CLI, the demo, the benchmarks, the examples and the
# tests: a test that needs a fault-injecting writer or a shared memory service
# passes it to ``bootstrap``). No test constructs the engine by hand to test the
# constructor itself, so there is no exception.
COMPOSITION_ROOT = _package_folder("pipeline") / "bootstrap.py"
BUILDERS = sorted(
    {
        *(path for _, path in MODULES),
        *(path for folder in CLIENT_FOLDERS for path in (ROOT / folder).rglob("*.py")),
    }
)


def _shown(path: Path) -> str:
    """A path as a test id: relative to the checkout, or to the package."""
    for base in (ROOT, _package_folder("pipeline").parent):
        if path.is_relative_to(base):
            return str(path.relative_to(base))
    return str(path)


def _constructs(path: Path, name: str) -> list[str]:
    return [
        ast.unparse(call)[:60]
        for call in _calls(path)
        if (isinstance(call.func, ast.Name) and call.func.id == name)
        or (isinstance(call.func, ast.Attribute) and call.func.attr == name)
    ]


@pytest.mark.parametrize("path", BUILDERS, ids=[_shown(p) for p in BUILDERS])
def test_only_bootstrap_constructs_the_engine(path: Path):
    """``TurnEngine(...)`` appears in the composition root and nowhere else."""
    found = _constructs(path, "TurnEngine")
    if path == COMPOSITION_ROOT:
        assert len(found) == 1, found
        return
    assert not found, f"{_shown(path)} builds the engine: use bootstrap"
