"""The public surface is deliberate: every ``__all__`` is sorted, unique and names what exists.

The order is ruff's RUF022 ("isort-style"): SCREAMING_CASE constants, then CamelCase classes,
then everything else, each group alphabetical -- httpx's ``__all__ == sorted(...)`` guard with
the order our linter writes.

Read with ``ast``, not by importing, so modules that only make sense inside the kernel are
checked without running them.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

import biopb_mcp

PACKAGE = Path(biopb_mcp.__file__).parent


def isort_style(name: str) -> tuple[int, str]:
    if name.isupper():
        return (0, name)
    return (1 if name[:1].isupper() else 2, name)


def modules_with_all() -> list[Path]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_docs_data" in path.parts:
            continue
        if "__all__" in path.read_text(encoding="utf-8"):
            found.append(path)
    return found


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines or imports at top level (including under if/try)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert node.value is not None
                value = ast.literal_eval(node.value)
                return list(value)
    return None


@pytest.mark.parametrize("path", modules_with_all(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_all_is_sorted_unique_and_defined(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = declared_all(tree)
    if names is None:
        pytest.skip("mentions __all__ without declaring it")
    expected = sorted(names, key=isort_style)
    assert names == expected, f"sort __all__ in {path.name}: {expected}"
    assert len(names) == len(set(names)), "duplicate names in __all__"
    missing = set(names) - top_level_names(tree)
    assert not missing, f"__all__ names what {path.name} does not define: {missing}"


def test_package_exports_everything_public_it_defines() -> None:
    public = {
        name
        for name, value in vars(biopb_mcp).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)  # submodules attach themselves on import
        # names imported from elsewhere (importlib.metadata.version) are not ours to export
        and str(getattr(value, "__module__", "biopb_mcp") or "").startswith("biopb_mcp")
    }
    assert public <= set(biopb_mcp.__all__), f"add to biopb_mcp.__all__: {public - set(biopb_mcp.__all__)}"
    assert biopb_mcp.__all__ == sorted(biopb_mcp.__all__, key=isort_style)
