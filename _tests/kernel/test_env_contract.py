"""The kernel's environment contract: the names the kernel reads are the names ``kernel.env`` declares.

Code inside the kernel imports nothing of biopb_mcp, so it reads each ``BIOPB_MCP_*`` variable by
its literal name; the server side builds the environments only in ``kernel/env.py``. Both are
checked on the sources, so a variable added on one side only fails here, not in a kernel.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import biopb_mcp
from biopb_mcp.kernel import env as contract

PACKAGE = Path(biopb_mcp.__file__).parent
INSIDE = PACKAGE / "kernel" / "inside"
NAME = re.compile(r"BIOPB_MCP_[A-Z_]+")


def _code_strings(path: Path) -> list[str]:
    """Every string constant of ``path`` but its docstrings (prose may mention a name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def _names_in(paths: list[Path]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in paths:
        for text in _code_strings(path):
            for name in NAME.findall(text):
                found.setdefault(name, []).append(str(path.relative_to(PACKAGE)))
    return found


def test_every_name_read_inside_the_kernel_is_declared_and_every_declared_name_is_read() -> None:
    read = _names_in(sorted(INSIDE.glob("*.py")) + sorted((PACKAGE / "ipython").glob("*.py")))
    assert set(read) == set(contract.NAMES), (
        f"read inside but not declared: {sorted(set(read) - contract.NAMES)}; "
        f"declared but read nowhere inside: {sorted(contract.NAMES - set(read))}"
    )


def test_only_kernel_env_writes_the_names_on_the_server_side() -> None:
    server_side = [
        path
        for path in sorted(PACKAGE.rglob("*.py"))
        if INSIDE not in path.parents and path != PACKAGE / "kernel" / "env.py" and "_docs_data" not in path.parts
    ]
    assert _names_in(server_side) == {}


def test_every_declared_constant_is_in_names() -> None:
    declared = {value for key, value in vars(contract).items() if key.endswith("_ENV") and isinstance(value, str)}
    assert declared == contract.NAMES
