"""The install page's ``pipx`` and ``uvx`` lines, run as written from a checkout and from its git URL.

uv and pipx come from PyPI into a venv of the test's own (installing them beside the suite would
upgrade what the suite runs on), and every line runs with a home, caches, tool and bin folders
under the test's temporary folder, so nothing of the user's is read or written. Each line fetches
biopb-mcp's dependencies from PyPI as a user's would: without the registry the tests skip.

The documented lines ask for the ``imaging`` extra: the page's lines are run with their extras
taken out (``BIOPB_TOOL_INSTALL_EXTRAS=1`` keeps them), which keeps the download to the server's
own dependencies (~130 MB instead of ~900 MB); that the extras exist is checked apart, and
whether pip resolves each extra is ``_tests/test_install_lines.py``'s work.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from _tests.support.isolation import isolated_vars
from _tests.test_install_lines import checkout  # noqa: F401 (a fixture: a committed copy of the source tree)

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "install.md").read_text(encoding="utf-8")
EXTRAS = set(tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"])
KEEP_EXTRAS = os.environ.get("BIOPB_TOOL_INSTALL_EXTRAS") == "1"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def documented() -> tuple[list[str], list[str]]:
    """The page's pipx/uvx command lines (comments dropped) and the uvx arguments it gives a host."""
    block = re.search(r"## Without a virtualenv of your own.*?```sh\n(.+?)```", PAGE, re.S)
    assert block, "install.md lost its pipx/uvx block"
    lines = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]
    args = re.search(r"the host's command is `uvx` and the arguments are\s+`(\[.+?\])`", PAGE, re.S)
    assert args, "install.md lost the uvx host arguments"
    return lines, json.loads(args.group(1))


def runnable(text: str, checkout: Path) -> str:  # noqa: F811
    """A documented line or argument with the checkout's path and git URL filled in."""
    # a file URL with a host: pip's requirement parser refuses git+file:///
    text = text.replace("/path/to/checkout", str(checkout)).replace(
        "git+<repository URL>", f"git+file://localhost{checkout}"
    )
    if not KEEP_EXTRAS:
        text = re.sub(r"\[[a-z,]+\]", "", text)
    assert "<" not in text, f"a placeholder this test does not fill: {text}"
    return text


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A venv holding uv and pipx (from PyPI), and the environment every line runs in."""
    root = tmp_path_factory.mktemp("tools")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "uv", "pipx"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if fetched.returncode != 0:
        pytest.skip(f"uv and pipx could not be installed from PyPI: {fetched.stderr.strip()[-500:]}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= isolated_vars(root / "biopb")
    env |= {
        "HOME": str(root / "home"),
        "PATH": f"{venv / 'bin'}{os.pathsep}{root / 'bin'}{os.pathsep}{env['PATH']}",
        "UV_CACHE_DIR": str(root / "uv-cache"),
        "UV_TOOL_DIR": str(root / "uv-tools"),
        "UV_TOOL_BIN_DIR": str(root / "bin"),
        "UV_PYTHON_INSTALL_DIR": str(root / "uv-python"),
        "PIPX_HOME": str(root / "pipx"),
        "PIPX_BIN_DIR": str(root / "bin"),
        "PIPX_MAN_DIR": str(root / "man"),
    }
    (root / "home").mkdir()
    return root, env


def run(line: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        shlex.split(line),
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{line}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_the_pages_lines_ask_for_extras_the_project_has() -> None:
    lines, args = documented()
    assert [line.split()[:2] for line in lines] == [["pipx", "install"]] * 2 + [["uvx", "--from"]], lines
    asked = {
        extra for text in [*lines, *args] for group in re.findall(r"\[([a-z,]+)\]", text) for extra in group.split(",")
    }
    assert asked and asked <= EXTRAS, asked


@pytest.mark.anyio
async def test_uvx_runs_the_demo_from_the_checkout_and_serves_a_host(
    home: tuple[Path, dict[str, str]],
    checkout: Path,  # noqa: F811
) -> None:
    """``uvx --from <checkout> biopb-mcp demo`` passes every step; the host's uvx command serves MCP."""
    root, env = home
    (*_, line), args = documented()
    demo = await anyio.to_thread.run_sync(lambda: run(runnable(line, checkout), env, root))
    assert "ok: every step passed" in demo.stdout, demo.stdout[-3000:]
    kernel = "numpy + scikit-image" if KEEP_EXTRAS else "plain Python"
    assert f"found 15 with {kernel}" in demo.stdout, demo.stdout[-3000:]

    params = StdioServerParameters(
        command="uvx", args=[runnable(arg, checkout) for arg in args], env=env, cwd=str(root)
    )
    with anyio.fail_after(300):
        async with Client(params, mode="legacy", read_timeout_seconds=240) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert "segment-nuclei" in (client.instructions or "")
    assert {"start_kernel", "execute_code"} <= tools, tools


def test_pipx_installs_from_the_checkout_and_from_its_git_url(
    home: tuple[Path, dict[str, str]],
    checkout: Path,  # noqa: F811
) -> None:
    """Each pipx line gives a working ``biopb-mcp`` that says where it was installed from; the
    uninstall page's ``pipx uninstall biopb-mcp`` takes the first away before the second."""
    root, env = home
    if not (checkout / ".git").is_dir():
        pytest.skip("git is not installed: the checkout is no repository to install from")
    local, from_git = (runnable(line, checkout) for line in documented()[0][:2])
    command = root / "bin" / "biopb-mcp"
    venv_python = root / "pipx" / "venvs" / "biopb-mcp" / "bin" / "python"
    printed = "from biopb_mcp.text.install import install_command; print(install_command('console'))"
    for line, source in ((local, f"'{checkout}[console]'"), (from_git, f"@ git+file://localhost{checkout}")):
        run(line, env, root)
        helped = run(f"{command} --help", env, root).stdout
        assert "serve over stdio (what an MCP client launches)" in helped, helped
        said = run(shlex.join([str(venv_python), "-c", printed]), env, root).stdout
        assert source in said, said
        run("pipx uninstall biopb-mcp", env, root)
        assert not command.exists()
