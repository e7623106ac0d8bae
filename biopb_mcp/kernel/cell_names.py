"""Which global names a cell of Python binds and which it reads, from its source alone.

The session notebook re-runs in a plain kernel, which lacks the names someone typed outside the
agent's cells (a console, the notebook the agent joined): the recorder learns which names those
cells bound, and which names the agent's cells then read without binding them, from the code's
syntax tree. This is an approximation by design (``globals()['z']`` and ``exec`` go unseen, and
``x = x + 1`` reads nothing from before, as far as it knows): it names what a reader should
check, it proves nothing.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

__all__ = ["CellNames", "cell_names"]

MAX_PARSED_CHARS = 1_000_000
"""Longer code is not parsed (a pasted data dump): it binds and reads nothing as far as we know."""

_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


@dataclass(frozen=True)
class CellNames:
    """The global names one cell binds, and the names it reads that it binds nowhere itself."""

    binds: frozenset[str]
    """Bound in the cell's own (the module's) scope: what later cells can read."""
    free: frozenset[str]
    """Read somewhere in the cell and bound nowhere in it (no assignment, parameter, loop or
    comprehension variable of that name): what must come from before the cell."""


_NOTHING = CellNames(frozenset(), frozenset())


def _tree(code: str) -> ast.Module | None:
    """The cell's syntax tree; IPython syntax (``%magic``, ``!cmd``) turned into Python first."""
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        pass
    try:  # IPython comes with ipykernel; only cells that are not plain Python need it
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return None
    try:
        return ast.parse(TransformerManager().transform_cell(code))  # type: ignore[no-untyped-call]
    except (SyntaxError, ValueError):
        return None


def _bound_at_top(node: ast.AST, out: set[str]) -> None:
    """Names ``node`` binds in the module's own scope (function and class bodies are others)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(node.name)
        return
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            if alias.name != "*":
                out.add(alias.asname or alias.name.split(".")[0])
        return
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        out.add(node.id)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        out.add(node.name)
    if isinstance(node, _SCOPES):
        return
    for child in ast.iter_child_nodes(node):
        _bound_at_top(child, out)


@functools.lru_cache(maxsize=256)
def cell_names(code: str) -> CellNames:
    """The names ``code`` binds at the top level and reads from before it (nothing when it does not parse)."""
    if len(code) > MAX_PARSED_CHARS:
        return _NOTHING
    tree = _tree(code)
    if tree is None:
        return _NOTHING
    binds: set[str] = set()
    _bound_at_top(tree, binds)
    reads: set[str] = set()
    anywhere = set(binds)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (reads if isinstance(node.ctx, ast.Load) else anywhere).add(node.id)
        elif isinstance(node, ast.arg):
            anywhere.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            anywhere.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            anywhere.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            anywhere.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
    return CellNames(frozenset(binds), frozenset(reads - anywhere))
