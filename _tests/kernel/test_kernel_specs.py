"""The kernel a scientist points at: a named kernel spec, and plugins shipped as entry points."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _tests.support.isolation import make_settings
from _tests.support.kernel_helpers import stop_process
from _tests.support.processes import wait_gone
from _tests.support.runner import run_text
from biopb_mcp.kernel import KernelHost
from biopb_mcp.text.kernel import inspection_text, started

pytestmark = pytest.mark.slow


_run = run_text


def test_a_named_python_kernel_spec_runs_with_its_env_bootstrap_and_plugins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The environment a lab's analysis packages live in: here a spec of this Python with its own env var.
    spec_dir = tmp_path / "jupyter" / "kernels" / "lab-env"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Lab env",
        "language": "python",
        "env": {"LAB_MARKER": "from-the-spec"},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    settings = make_settings(tmp_path / "srv", kernel='name = "lab-env"\n')
    Path(settings.plugins_dir).mkdir(parents=True)
    (Path(settings.plugins_dir) / "lab.py").write_text("LAB_PIXEL_SIZE_UM = 0.325\n")
    host = KernelHost(settings)
    try:
        host.start()
        status = host.status()
        assert "lab-env" in str(status.kernel_spec)
        assert status.parent_death_watch is True  # a Python spec gets the bootstrap too
        assert _run(host, "import os; os.environ['LAB_MARKER']") == "'from-the-spec'"
        assert _run(host, "LAB_PIXEL_SIZE_UM * 2") == "0.65"
    finally:
        host.shutdown()


def test_entry_point_plugins_load_into_the_namespace_and_a_broken_one_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An installed package that declares [project.entry-points."biopb_mcp.namespace"].
    site = tmp_path / "site"
    (site / "labtools").mkdir(parents=True)
    (site / "labtools" / "__init__.py").write_text(
        '"""The lab\'s helpers."""\n\ndef scale_bar_um(pixels, pixel_size_um=0.325):\n'
        '    """Length of a scale bar in micrometres."""\n    return pixels * pixel_size_um\n'
    )
    (site / "labtools" / "broken.py").write_text("raise ImportError('labtools.broken needs a missing package')\n")
    dist = site / "labtools-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: labtools\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[biopb_mcp.namespace]\nlabtools = labtools\nbroken = labtools.broken\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    host = KernelHost(make_settings(tmp_path / "srv"))
    try:
        said = started(host.start())
        status = host.status()
        assert any("labtools" in json.dumps(p) for p in status.plugins_loaded), status
        assert any("broken" in json.dumps(p) and "ImportError" in json.dumps(p) for p in status.plugins_failed), status
        assert "broken" in said
        assert _run(host, "labtools.scale_bar_um(100)") == "32.5"
        described = inspection_text(host.probes.inspect("labtools.scale_bar_um"))
        assert "Length of a scale bar" in described and "pixel_size_um" in described
    finally:
        host.shutdown()


_TINY_SERVER = """
import json, sys
from biopb_mcp.config.settings import load_settings
from biopb_mcp.kernel import KernelHost
host = KernelHost(load_settings(sys.argv[1]))
host.start()
status = host.status()
print(json.dumps([status.pid, status.parent_death_watch, {"loaded": status.plugins_loaded, "failed": status.plugins_failed}]), flush=True)
sys.stdin.read()
"""


def test_a_kernel_without_the_bootstrap_still_dies_with_its_sigkilled_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A spec we cannot bootstrap (not Python as far as the host knows: think R or Julia): no
    # in-kernel watcher, so only the reaper beside it can end it when the server is SIGKILLed.
    spec_dir = tmp_path / "jupyter" / "kernels" / "foreign"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Foreign",
        "language": "other",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    settings = make_settings(tmp_path / "srv", kernel='name = "foreign"\n')
    server = subprocess.Popen(
        [sys.executable, "-c", _TINY_SERVER, str(settings.config_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    kernel_pid = None
    try:
        assert server.stdout is not None
        kernel_pid, watched, plugins = json.loads(server.stdout.readline())
        assert plugins == {"loaded": [], "failed": []}  # proof the bootstrap did not run
        assert watched is True
        server.kill()
        server.wait()
        # it never ends by itself (no parent poller): only the reaper ends it within the bound
        assert wait_gone(kernel_pid, 30.0), "a kernel without the bootstrap outlived its SIGKILLed server"
    finally:
        stop_process(server, kernel_pid)
