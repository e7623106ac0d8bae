"""Every install line the README or a message prints installs this project, with its extras, in a
fresh venv: the bare name on PyPI is an earlier project's (0.5.1-0.7.2, without these extras).

Offline: pip runs with ``--no-index`` (a line that needs the index fails), ``--no-deps`` and
``--no-build-isolation``, and resolves each line with ``--dry-run --report``, which says what it
would install (name, version, the extras it provides and those asked for). One line is installed
for real, and what that installed copy prints is run in turn.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import Any

import pytest

from biopb_mcp.fs.install_source import requirement
from biopb_mcp.text.install import install_command

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXTRAS = set(PROJECT["optional-dependencies"])
LAST_EARLIER_RELEASE = (0, 7, 2)
"""The earlier biopb-mcp's last release on PyPI: this project's version must be above it."""

README_LINE = re.compile(r"pip install (?:-e )?(?:'[^']+'|\"[^\"]+\")")

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    """This environment minus PYTHONPATH, which would import a checkout instead of the venv's copy."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True
    )


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the source tree, committed to a git repository of its own (for the git URL line)."""
    src = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "biopb_mcp", src / "biopb_mcp", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    if shutil.which("git") is not None:
        _git(src, "init", "-q")
        _git(src, "add", "-A")
        _git(src, "commit", "-q", "-m", "copy")
    return src


def fresh_venv(where: Path) -> Path:
    """A venv without pip, seeing the running environment's packages through a plain path entry (the
    build backend, for --no-build-isolation); its .pth files, our editable finder among them, are
    not run. Returns its python."""
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot create a venv here ({exc}): the install lines are not checked")
    (site,) = where.glob("lib/python3*/site-packages")
    parent = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_parent_env.pth").write_text("\n".join(sorted(parent)) + "\n", encoding="utf-8")
    return where / "bin" / "python"


def resolve(line: str, venv_python: Path, cwd: Path, *extra: str) -> dict[str, Any]:
    """What ``line`` would install into the venv, run as printed with only offline flags added."""
    argv = shlex.split(line)
    assert argv[:2] == ["pip", "install"], line
    report = venv_python.parents[2] / f"report-{abs(hash((line, str(cwd))))}.json"  # beside the venv
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv_python),
            *argv[1:],
            "--dry-run",
            "--report",
            str(report),
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--ignore-installed",
            "--disable-pip-version-check",
            *list(extra),
        ],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    assert "does not provide the extra" not in done.stderr, done.stderr
    (item,) = json.loads(report.read_text(encoding="utf-8"))["install"]
    return dict(item)


def assert_this_project(item: dict[str, Any], line: str) -> None:
    meta = item["metadata"]
    assert (meta["name"], meta["version"]) == (PROJECT["name"], PROJECT["version"]), line
    asked = set(item.get("requested_extras") or [])
    assert asked and asked <= set(meta.get("provides_extra", [])) and asked <= EXTRAS, (line, asked)


def test_the_version_continues_above_the_earlier_release_of_the_name() -> None:
    version = tuple(int(part) for part in PROJECT["version"].split(".")[:3])
    assert version > LAST_EARLIER_RELEASE, PROJECT["version"]


def test_each_readme_install_line_resolves_to_this_project(checkout: Path, tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = sorted(set(README_LINE.findall(readme)))
    assert len(lines) >= 5, lines  # the top two commands, the console, notebook and viewer extras
    assert not [line for line in lines if re.search(r"install ['\"](biopb-mcp|biopb_mcp)\[[^]]*\]['\"]", line)], lines
    py = fresh_venv(tmp_path / "venv")
    has_git = (checkout / ".git").is_dir()
    for line in lines:
        runnable = line.replace("/path/to/checkout", str(checkout))
        if "git+<repository URL>" in runnable:
            if not has_git:
                continue
            # a file URL with a host: pip's requirement parser refuses git+file:///
            runnable = runnable.replace("git+<repository URL>", f"git+file://localhost{checkout}")
        assert "<" not in runnable, f"a placeholder this test does not fill: {line}"
        assert_this_project(resolve(runnable, py, checkout), line)


def test_the_printed_install_lines_name_where_this_copy_came_from(checkout: Path, tmp_path: Path) -> None:
    """A run from a checkout prints its path; a copy installed from a wheel, its wheel; and each
    printed line installs this project in another fresh venv."""
    from_checkout = f"pip install {shlex.quote(requirement('console', checkout / 'biopb_mcp'))}"
    assert from_checkout == f"pip install '{checkout}[console]'"
    assert install_command("viewer") == f"pip install '{REPO}[viewer]'"  # what the server running the tests prints
    py = fresh_venv(tmp_path / "one")
    assert_this_project(resolve(from_checkout, py, tmp_path), from_checkout)

    # install the checkout for real, as a wheel built from it, and ask that copy what it prints
    dist = tmp_path / "dist"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "-w",
            str(dist),
            "--disable-pip-version-check",
            "--quiet",
            str(checkout),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("biopb_mcp-*.whl")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--quiet",
            str(wheel),
        ],
        env=_env(),
        check=True,
        capture_output=True,
        timeout=240,
    )
    printed = subprocess.run(
        [str(py), "-c", "from biopb_mcp.text.install import install_command; print(install_command('console'))"],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert printed == f"pip install 'biopb-mcp[console] @ {wheel.as_uri()}'", printed
    assert_this_project(resolve(printed, fresh_venv(tmp_path / "two"), tmp_path), printed)

    # with nothing recorded (installed from an index), the name with this version as a floor: it
    # finds this project's wheel and can never pick the earlier releases
    (installed,) = (tmp_path / "one").glob("lib/python3*/site-packages/biopb_mcp-*.dist-info")
    (installed / "direct_url.json").unlink()
    printed = subprocess.run(
        [str(py), "-c", "from biopb_mcp.text.install import install_command; print(install_command('console'))"],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert printed == f"pip install 'biopb-mcp[console]>={PROJECT['version']}'", printed
    found = resolve(printed, fresh_venv(tmp_path / "three"), tmp_path, "--find-links", str(dist))
    assert_this_project(found, printed)
