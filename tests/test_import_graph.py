"""Imports point one way. The neural package and the whole tree have no import circle: every import (at the top,
inside a function or under ``if __name__ == "__main__":``, which run later but still tie the modules together)
points one way; ``names`` is the leaf the neural package reads. ``python -m crs_backends.neural.sources`` hands
over to the command line in ``fetch`` from the package's own ``__main__`` module, which nothing imports. Across
packages the layers are the README's: ``ui → arena, evaluators, crs_backends → llm_clients, catalog → storage``;
no module imports from a layer above its own. In ``ui`` only ``ui.services`` imports storage (the shared
record types aside): the tabs reach it through the services.

Read with ``ast``, nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "crs_backends" / "neural"
HELD = {"crs_backends.train"}  # the training command line's alias, held to the same rule as the package


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    base = ROOT / Path(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def imports_of(path: Path) -> set[str]:
    """The modules of ours that ``path`` imports anywhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for candidate in [node.module, *(f"{node.module}.{a.name}" for a in node.names)]:
                if _is_module(candidate):
                    found.add(candidate)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if _is_module(a.name))
    me = module_name(path)
    return {m for m in found if m != me and m not in ("crs_backends", "crs_backends.neural")}


def graph() -> dict[str, set[str]]:
    paths = [*PACKAGE.rglob("*.py"), *((ROOT / Path(*m.split("."))).with_suffix(".py") for m in HELD)]
    return {module_name(p): imports_of(p) for p in paths}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each module that lies on one (depth-first search over the held modules)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges:
                continue  # outside the held modules
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_neural_package_has_no_import_circle():
    edges = graph()
    assert "crs_backends.neural.sources" in edges and edges["crs_backends.neural.sources"], "nothing was read"
    assert circles(edges) == []


def test_names_is_a_leaf():
    assert imports_of(PACKAGE / "names.py") == set()


# the two entry points at the top (the app and the crs-arena command line), then the README's layers
LAYERS = {
    "app": -1,
    "commands": -1,
    "ui": 0,
    "arena": 1,
    "evaluators": 1,
    "crs_backends": 1,
    "llm_clients": 2,
    "catalog": 2,
    "storage": 3,
}


def tree() -> dict[str, set[str]]:
    paths = [p for package in LAYERS for p in ((ROOT / package).rglob("*.py") if (ROOT / package).is_dir() else [])]
    paths += [ROOT / f"{name}.py" for name in LAYERS if (ROOT / f"{name}.py").is_file()]
    return {module_name(p): imports_of(p) for p in paths}


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from a lower layer to a higher one."""
    return sorted(
        (a, b)
        for a, targets in edges.items()
        for b in targets
        if b.split(".")[0] in LAYERS and LAYERS[b.split(".")[0]] < LAYERS[a.split(".")[0]]
    )


def test_the_whole_tree_has_no_import_circle():
    edges = tree()
    assert len(edges) > 100 and {"crs_backends.registry", "commands", "app"} <= set(edges), "nothing was read"
    assert circles(edges) == []


def test_no_module_imports_from_a_layer_above_its_own():
    assert upward({"storage.x": {"arena.y"}, "arena.y": {"storage.x"}}) == [("storage.x", "arena.y")]
    assert upward(tree()) == []


# What a tab may read of storage without the services: the data types every layer shares.
SHARED_TYPES = {"storage.records"}


def storage_reached_around_the_services(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports of storage from a ui module other than ``ui.services`` (the one door the tabs use), records aside."""
    return sorted(
        (a, b)
        for a, targets in edges.items()
        if a.split(".")[0] == "ui" and a != "ui.services"
        for b in targets
        if b.split(".")[0] == "storage" and b not in SHARED_TYPES
    )


def test_the_tabs_reach_storage_only_through_the_services():
    assert storage_reached_around_the_services({"ui.x_tab": {"storage.uploads", "storage.records"}}) == [
        ("ui.x_tab", "storage.uploads")
    ]
    assert storage_reached_around_the_services({"ui.services": {"storage.uploads"}}) == []
    edges = tree()
    assert {"ui.evaluate_tab", "ui.chat_tab", "ui.services"} <= set(edges), "nothing was read"
    assert storage_reached_around_the_services(edges) == []
