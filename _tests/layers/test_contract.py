"""The layers hold: the import contract passes, breaks on a violation, and kernel-side code is stdlib only."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import biopb_mcp
from biopb_mcp.kernel.inside import INSIDE_DIR

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(biopb_mcp.__file__).parent

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("importlinter") is None, reason="import-linter (the dev extra) is not installed"
)


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the package found under ``root``, with this repository's contracts."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
            "--config",
            str(REPO / "pyproject.toml"),
            "--no-cache",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(root), "PATH": ""},
    )


def test_the_import_contract_is_kept() -> None:
    done = lint_imports(PACKAGE.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "BROKEN" not in done.stdout and done.stdout.count("KEPT") >= 4


def test_a_docs_module_importing_the_mcp_sdk_breaks_it(tmp_path: Path) -> None:
    copy = tmp_path / "biopb_mcp"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "_docs_data"))
    (copy / "docs" / "leaky.py").write_text("from mcp.types import TextContent\n", encoding="utf-8")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    assert "biopb_mcp.docs is not allowed to import mcp" in done.stdout, done.stdout


def test_a_domain_module_importing_the_text_layer_breaks_it(tmp_path: Path) -> None:
    copy = tmp_path / "biopb_mcp"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "_docs_data"))
    (copy / "kernel" / "leaky.py").write_text("from biopb_mcp.text import kernel\n", encoding="utf-8")
    done = lint_imports(tmp_path)
    assert done.returncode != 0 and "biopb_mcp.kernel is not allowed to import biopb_mcp.text" in done.stdout, (
        done.stdout
    )


STDLIB_ONLY = """
import importlib.abc, importlib.util, sys
allowed = set(sys.stdlib_module_names) | set(sys.builtin_module_names)
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in allowed:
            raise ImportError(f"{name} is not in the standard library")
        return None
sys.meta_path.insert(0, Refuse())
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("inside_" + path.rsplit("/", 1)[1][:-3], path)
    module = importlib.util.module_from_spec(spec)
    if path.endswith("bootstrap.py"):
        continue  # executed as a kernel's exec_files, not imported: checked by its own tests
    spec.loader.exec_module(module)
print("ok")
"""


def test_code_that_runs_in_the_kernel_imports_only_the_standard_library_when_loaded() -> None:
    files = sorted(str(p) for p in INSIDE_DIR.glob("*.py") if p.name != "__init__.py")
    assert files
    done = subprocess.run([sys.executable, "-I", "-c", STDLIB_ONLY, *files], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
