"""The package's shape: stages import only the stages before them, and nothing imports in a cycle."""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.pure  # needs no server: `make test-fast` runs it

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("llmload", "plots")
# Each layer may import itself and the layers listed before it (stages of the data path).
LAYERS = (
    ("llmload.errors", "llmload.options", "llmload.settings", "llmload.system", "llmload.credentials", "llmload.timescale"),
    ("llmload.promptsets", "llmload.results"),
    ("llmload.sim", "llmload.vllm_cpu", "llmload.calibrate", "llmload.bundle"),
    ("llmload.client",),
    ("llmload.loadtest",),
    ("llmload.sweep", "llmload.crosscheck", "llmload.tune"),
    ("llmload.cli", "llmload.__main__", "plots"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each module's imports of the suite's own modules (function-level imports included)."""
    graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = _module_name(path)
            found = graph.setdefault(name, set())
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.level:
                    base = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
                    for _ in range(node.level - 1):
                        base = base.rsplit(".", 1)[0]
                    target = f"{base}.{node.module}" if node.module else base
                    found.update(f"{target}.{a.name}" for a in node.names)
                    found.add(target)
                elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                    found.add(node.module)
                    found.update(f"{node.module}.{a.name}" for a in node.names)
                elif isinstance(node, ast.Import):
                    found.update(a.name for a in node.names if a.name.split(".")[0] in PACKAGES)
    return {m: {t for t in targets if t in graph and t != m} for m, targets in graph.items()}


def _layer(module: str) -> int:
    for number, layer in enumerate(LAYERS):
        if any(module == prefix or module.startswith(prefix + ".") for prefix in layer):
            return number
    raise AssertionError(f"{module} is in no layer; add it to LAYERS")


def test_every_import_points_to_the_same_or_an_earlier_layer():
    wrong = [f"{m} -> {t}" for m, targets in _imports().items() for t in targets
             if m != "llmload" and t != "llmload" and _layer(t) > _layer(m)]
    assert wrong == []


def test_plots_reads_only_results():
    allowed = ("llmload.results", "llmload.errors", "llmload.system.files", "llmload.options", "llmload.settings",
               "llmload.timescale", "plots")
    wrong = [f"{m} -> {t}" for m, targets in _imports().items() if m.startswith("plots")
             for t in targets if not t.startswith(allowed)]
    assert wrong == []


def test_no_import_cycle():
    graph = _imports()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target] if target in path else [module, target])
            elif target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # A package's __init__ that re-exports a submodule is not a cycle of code.
    real = [c for c in cycles if not any(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(c, c[1:]))]
    assert real == []

