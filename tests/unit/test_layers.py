"""The package has no import cycle, module by module (docs/design.md, "Layers").

`lint-imports` checks the layers and cycles between sibling packages; this test looks at every
module pair, so a cycle inside one package (two modules of `lsp/` importing each other, even
through a function-local import) fails here with the modules named.
"""

from __future__ import annotations

import grimp


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    imported = graph.find_modules_directly_imported_by(child) & modules
                    work.append((child, iter(sorted(imported))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    graph = grimp.build_graph("cuda_llm_lsp", include_external_packages=False)
    # A package's __init__ is imported by each of its modules' import statements; count only
    # modules with code of their own in the cycle search.
    modules = {m for m in graph.modules if m != "cuda_llm_lsp"}
    cycles = _cycles(graph, modules)
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_only_the_device_unit_door_imports_its_stages() -> None:
    """`compile.unit` is private to `compile.device_unit` (docs/design.md, Layout): the rest
    of the package asks the door, so the stages can be moved and renamed freely."""
    graph = grimp.build_graph("cuda_llm_lsp", include_external_packages=False)
    stages = {m for m in graph.modules if m.startswith("cuda_llm_lsp.compile.unit.")}
    assert stages, "compile.unit has no modules"
    importers = {
        importer
        for stage in stages
        for importer in graph.find_modules_that_directly_import(stage)
        if not importer.startswith("cuda_llm_lsp.compile.unit")
    }
    assert importers == {"cuda_llm_lsp.compile.device_unit"}, sorted(importers)
