"""The public surface is deliberate: the package exports what it defines, and no ``__all__``
names a thing twice. (ruff checks the rest: RUF022 keeps every ``__all__`` sorted, F822 that
it names only what exists.)

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


def modules_with_all() -> list[Path]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_docs_data" in path.parts:
            continue
        if "__all__" in path.read_text(encoding="utf-8"):
            found.append(path)
    return found


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
def test_module_all_names_each_thing_once(path: Path) -> None:
    names = declared_all(ast.parse(path.read_text(encoding="utf-8")))
    if names is None:
        pytest.skip("mentions __all__ without declaring it")
    assert len(names) == len(set(names)), "duplicate names in __all__"


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
