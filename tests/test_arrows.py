"""The arrows between the package's modules point one way.

cli and mcp_server speak to the public API (session_recall.Index, the model,
the config), never to the store, the indexer or the query side; doctor and
index do not import each other in a circle; the indexer and the query side do
not import each other; source parsers take their protocol from
indexer/sources/base.py, not from the package that imports them. Imports are
read with `ast` at every level (a deferred import inside a function counts;
one under `if TYPE_CHECKING:`, for annotations only, never runs and does not).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import session_recall

PACKAGE = Path(session_recall.__file__).parent
INTERNALS = ("session_recall.store", "session_recall.indexer", "session_recall.query",
             "session_recall.migrations", "session_recall.text", "session_recall.doctor")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def runtime_nodes(tree: ast.AST):
    """Every node of `tree` but those under `if TYPE_CHECKING:` (imports for
    annotations only, which never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imports(path: Path) -> set[str]:
    """Every module `path` imports, absolute, at any level of the file; a
    `from X import name` counts X.name when that is a module, else X."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                found.add(f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in MODULES else origin)
    return {m for m in found if m == "session_recall" or m.startswith("session_recall.")}


GRAPH = {name: {m for m in imports(path) if m in MODULES and m != name} for name, path in MODULES.items()}


def reaches(start: str) -> set[str]:
    """The package's modules that `start` imports, directly or not."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for m in GRAPH[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return seen


def is_internal(module: str) -> bool:
    return any(module == i or module.startswith(i + ".") for i in INTERNALS)


@pytest.mark.parametrize("front", ["session_recall.cli", "session_recall.mcp_server"])
def test_the_command_line_and_the_mcp_server_speak_to_the_public_api_only(front):
    direct = imports(MODULES[front])
    assert sorted(m for m in direct if is_internal(m)) == []


def test_doctor_never_imports_the_index_and_the_index_reaches_doctor_one_way():
    assert "session_recall.index" not in reaches("session_recall.doctor")
    assert "session_recall" not in GRAPH["session_recall.doctor"]  # nor the package, whose API is the index


def test_the_package_has_no_import_cycle():
    def cycle_through(start: str) -> bool:
        return start in reaches(start)

    cycles = sorted(m for m in GRAPH if m != "session_recall" and cycle_through(m))
    assert cycles == []


def test_source_parsers_take_their_protocol_from_the_base_module_not_from_their_package():
    parsers = [m for m in GRAPH if m.startswith("session_recall.indexer.sources.")
               and m.rpartition(".")[2] not in ("base", "media")]
    assert parsers
    for name in parsers:
        assert "session_recall.indexer.sources" not in GRAPH[name], name
        assert "session_recall.indexer.sources.base" in GRAPH[name], name


def test_the_indexer_and_the_query_side_do_not_import_each_other():
    for name, imported in GRAPH.items():
        if name.startswith("session_recall.indexer"):
            assert not any(m.startswith("session_recall.query") for m in imported), name
        if name.startswith("session_recall.query"):
            assert not any(m.startswith("session_recall.indexer") for m in imported), name
