"""The bench boundary runs one way: the bench takes what it shares with the tests from
``_tests.support``, and no product test imports the bench.

A product test that imported ``bench`` would break when a bench case or harness changes, and a
test helper living in ``bench`` would be found by no one looking in ``_tests/support``. Only
``_tests/bench/`` (the tests of the bench itself) imports it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "_tests"
BENCH = REPO / "bench"


def imported_modules(source: str) -> Iterator[tuple[int, str]]:
    """(line, module) for every absolute import in ``source``, at any depth (lazy imports too)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module


def imports_of(files: list[Path], top: str, root: Path = REPO) -> list[str]:
    """``path:line module`` for each import of package ``top`` (or a module under it) in ``files``."""
    found = []
    for path in files:
        for line, module in sorted(imported_modules(path.read_text(encoding="utf-8"))):
            if module == top or module.startswith(top + "."):
                found.append(f"{path.relative_to(root)}:{line} {module}")
    return found


def product_test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if (TESTS / "bench") not in p.parents)


def test_no_product_test_or_test_helper_imports_the_bench() -> None:
    files = product_test_files()
    assert len(files) > 50 and TESTS / "support" / "__init__.py" in files
    assert imports_of(files, "bench") == []


def test_the_bench_takes_only_the_shared_support_from_the_tests() -> None:
    files = sorted(BENCH.rglob("*.py"))
    shared = [hit for hit in imports_of(files, "_tests") if hit.split()[-1].startswith("_tests.support")]
    assert shared, "the bench shares the raw server, the soak rounds and the generators with the tests"
    assert [hit for hit in imports_of(files, "_tests") if hit not in shared] == []


def test_the_check_sees_every_form_of_a_bench_import(tmp_path: Path) -> None:
    """Top-level, dotted, from-import and lazy (inside a function) imports are all caught; a name
    that merely starts with ``bench`` is not."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import bench\nimport bench.ooc as o\nfrom bench.soak import run\nimport benchmark\n"
        "def f():\n    from bench.cases import all_cases\n",
        encoding="utf-8",
    )
    hits = imports_of([probe], "bench", root=tmp_path)
    assert hits == ["probe.py:1 bench", "probe.py:2 bench.ooc", "probe.py:3 bench.soak", "probe.py:6 bench.cases"]
