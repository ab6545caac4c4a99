"""The report's modules sit in no import circle: renderers below the model, `report.py` above them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports() -> dict[str, set[str]]:
    """Every perrec_eval module and the perrec_eval modules it imports, at the top or inside functions."""
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for path in (ROOT / "perrec_eval").rglob("*.py")
        if "metric" not in path.relative_to(ROOT).parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
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
    mine = [
        name for name in graph if name == "perrec_eval.report" or name.startswith("perrec_eval.leaderboard")
    ]
    assert len(mine) > 5
    assert [name for name in mine if name in _reachable(graph, name)] == []
