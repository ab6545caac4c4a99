"""No module of the product sits in an import circle (renderers below the report model, `report.py` above
them; the runner, builder and fine-tuning packages each above what they use)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports() -> dict[str, set[str]]:
    """Every product module and the product modules it imports, at the top or inside functions."""
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for package in ("perrec_eval", "dataset_builder", "sft")
        for path in (ROOT / package).rglob("*.py")
        if "metric" not in path.relative_to(ROOT).parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {  # `if TYPE_CHECKING:` imports are for annotations, never run
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules.keys()
                # `from package import submodule` needs the submodule, not what the package re-exports
                found |= submodules if len(submodules) == len(node.names) else submodules | {node.module}
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        graph[name] = {target for target in found if target in modules and target != name}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_imports_report_and_leaderboard_are_in_no_circle():
    graph = _imports()
    report = "perrec_eval.tasks.perrecbench.report"
    mine = [
        name
        for name in graph
        if name == report
        or name.startswith(("perrec_eval.leaderboard", "perrec_eval.tasks.perrecbench.leaderboard"))
    ]
    assert len(mine) > 5
    assert [name for name in mine if name in _reachable(graph, name)] == []


def test_imports_no_product_module_is_in_a_circle():
    graph = _imports()
    assert len(graph) > 60
    assert [name for name in graph if name in _reachable(graph, name)] == []


def test_imports_general_modules_import_no_family_module():
    """The task interface and registry sit below the engines and the family folders: a general module
    (`perrec_eval`'s own, its engines and shared leaderboard, the builder's and fine-tuning's top level)
    reaches a family only through the registry's strings, never by an import."""
    graph = _imports()
    families = ("perrec_eval.tasks.", "dataset_builder.perrecbench", "dataset_builder.llmrec")
    families += ("dataset_builder.recbench_plus", "sft.perrecbench")
    general = [name for name in graph if not name.startswith(families) and name != "perrec_eval.tasks"]
    expected = {"perrec_eval.registry", "perrec_eval.task", "perrec_eval.suite", "perrec_eval.publish"}
    assert expected <= set(general)
    found = {name: sorted(t for t in graph[name] if t.startswith(families)) for name in general}
    assert {name: targets for name, targets in found.items() if targets} == {}
