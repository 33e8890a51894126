"""No module imports itself back, through any path (docs/architecture.md).

The layers contract in ``pyproject.toml`` (run by ``make lint``) keeps imports between apps
pointing down; this test covers what it does not: cycles inside one app. Function-level
imports count too (grimp reads every import statement).
"""

from __future__ import annotations

import grimp

PACKAGES = ("memoryhub", "memories", "conversations", "retrieval", "capture", "evaluation", "integrations", "ui")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))
    return cycles


def test_the_project_has_no_import_cycle():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    assert import_cycles(graph) == []


def test_a_cycle_would_be_found():
    graph = grimp.ImportGraph()
    for module in ("app.a", "app.b", "app.c"):
        graph.add_module(module)
    graph.add_import(importer="app.a", imported="app.b")
    graph.add_import(importer="app.b", imported="app.c")
    assert import_cycles(graph) == []
    graph.add_import(importer="app.c", imported="app.a")
    assert import_cycles(graph) == [["app.a", "app.b", "app.c"]]
