"""The wheel carries the whole shipped docs seed, and installs into a fresh venv with a working script."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "biopb_mcp" / "_docs_data"

pytestmark = pytest.mark.slow

PROBES = (
    "biopb_mcp/_docs_data/_banked-top.md",
    "biopb_mcp/_docs_data/_bank/deep/nested/proc.md",
    "biopb_mcp/_docs_data/area/_private/figure.png",
)
"""Files added to the built copy only: banked names, nested dirs, a non-markdown asset."""


def seed_files() -> list[str]:
    """Every file of the shipped seed as a wheel path (hidden files are never docs: not shipped)."""
    files = []
    for path in SEED.rglob("*"):
        rel = path.relative_to(REPO)
        if path.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            files.append(rel.as_posix())
    return sorted(files)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the wheel from a copy of the source (no stale build/ dir, nothing written to the repo)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "biopb_mcp", src / "biopb_mcp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # shapes the seed may take later, so the package-data globs are proven on them today
    for rel in PROBES:
        probe = src / rel
        probe.parent.mkdir(parents=True, exist_ok=True)
        probe.write_text("# probe\n", encoding="utf-8")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (built,) = out.glob("biopb_mcp-*.whl")
    return built


def test_wheel_holds_every_seed_file_including_banked_and_nested(wheel: Path) -> None:
    expected = seed_files() + list(PROBES)
    assert "biopb_mcp/_docs_data/index.md" in expected, "the seed has an index"
    assert "biopb_mcp/_docs_data/authoring.md" in expected
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in expected if f not in names]
    assert missing == [], f"not in the wheel: {missing}; fix [tool.setuptools.package-data]"
    assert "biopb_mcp/py.typed" in names
    assert not any(n.startswith("_tests/") or n.startswith("bench/") for n in names)


def test_wheel_installs_into_a_fresh_venv_and_its_script_runs(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # The dependencies come from the running environment (venv or not) through a plain path
    # entry: unlike --system-site-packages, its .pth files (our editable finder) are not run.
    (site,) = venv.glob("lib/python3*/site-packages")
    # every site dir of the running interpreter: a --system-site-packages venv has two
    parent = {
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
        *(p for p in sys.path if p.endswith("site-packages")),
    }
    (site / "_parent_env.pth").write_text("\n".join(sorted(parent)) + "\n", encoding="utf-8")
    py = venv / "bin" / "python"
    done = subprocess.run(
        [
            str(py),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--ignore-installed",
            "--disable-pip-version-check",
            "--quiet",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    done = subprocess.run(
        [str(venv / "bin" / "biopb-mcp"), "--version"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    version = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert done.stdout.strip() == f"biopb-mcp {version}"  # the wheel's, whatever this environment installed
    # the venv imports its own copy (not the editable checkout), and its seed is complete
    done = subprocess.run(
        [str(py), "-c", "import biopb_mcp, pathlib; print(pathlib.Path(biopb_mcp.__file__).parent)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},  # a checkout on it would win
    )
    installed = Path(done.stdout.strip())
    assert installed.is_relative_to(venv), installed
    for rel in seed_files():
        assert (installed.parent / rel).is_file(), rel


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\[<>=~!; ]", requirement, maxsplit=1)[0]


def test_every_dependency_is_named_with_its_reason_in_the_readme() -> None:
    """A dependency is a decision: the README's Dependencies section names each one. The imaging
    extra holds what agents reach for in the kernel besides the procedures' own: pandas for tables,
    scikit-learn for clustering and mixture fits (written by hand when it was missing)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Dependencies\n", 1)[1].split("\n## ", 1)[0]
    imaging = {_requirement_name(r) for r in project["optional-dependencies"]["imaging"]}
    assert {"pandas", "scikit-learn"} <= imaging, imaging
    wanted = [*project["dependencies"], *(r for reqs in project["optional-dependencies"].values() for r in reqs)]
    names = {_requirement_name(r) for r in wanted} - {project["name"]}
    missing = sorted(name for name in names if name not in section)
    assert missing == [], f"not named in the README's Dependencies section: {missing}"


def test_the_x_libraries_ci_installs_are_those_the_viewer_names_and_the_readme_lists() -> None:
    from biopb_mcp.kernel.inside.viewer import X_LIBRARIES

    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    debs = set(ci.split('viewer_debs="', 1)[1].split('"', 1)[0].split()) - {"xvfb"}
    assert debs == set(X_LIBRARIES.values())
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "sudo apt-get install " + " ".join(X_LIBRARIES.values()) in readme


def test_ci_fails_on_a_ruff_or_mypy_finding_after_the_suite() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    tests_at, ruff_at, mypy_at = ci.index('"$PY" -m pytest'), ci.index('"$PY" -m ruff check'), ci.index('"$PY" -m mypy')
    assert tests_at < ruff_at < mypy_at
    assert ci.rstrip().endswith('exit "$lint"'), "a lint or type finding must fail the run"
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    dev = " ".join(project["project"]["optional-dependencies"]["dev"])
    assert "ruff" in dev and "mypy" in dev, "the dev extra installs what .ci/run calls"
    assert {"biopb_mcp", "bench", "_tests"} <= set(project["tool"]["mypy"]["files"])
    assert project["tool"]["mypy"]["strict"] is True


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = readme.split("```sh\n")
    install_run, test = blocks[1].split("\n```")[0].strip(), blocks[2].split("\n```")[0].strip()
    assert install_run == "pip install -e '.[imaging]' && biopb-mcp demo"
    pip_part, pytest_part = test.split(" && ")
    assert pip_part == "pip install -e '.[imaging,console,distributed,dev,viewer,live]'"
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in ci
    # .ci/run pins the interpreter: `"$PY" -m pip …` / `"$PY" -m pytest …` for `pip …` / `python -m pytest …`
    assert f'"$PY" -m {pip_part}' in ci
    assert f'"$PY" -m {pytest_part.removeprefix("python -m ")}' in ci
    assert (REPO / ".ci" / "run").stat().st_mode & 0o111, ".ci/run must be executable"
