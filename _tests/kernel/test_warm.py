"""The kernel imports the configured modules in the background after start, and never while a cell runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from _tests.support.isolation import make_settings
from _tests.support.runner import finish_ok
from biopb_mcp.kernel import KernelHost
from biopb_mcp.text.kernel import rendered_text

SLOW_MODULE = """\
import time
with open({log!r}, "a") as fh:
    fh.write("start {name} %r\\n" % time.time())
time.sleep(0.4)
with open({log!r}, "a") as fh:
    fh.write("end {name} %r\\n" % time.time())
"""

STATUS = "__import__('sys').modules['biopb_mcp_builtin_warm'].status_json()"


def test_configured_modules_are_imported_in_the_background_and_never_while_a_cell_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mods, log = tmp_path / "mods", tmp_path / "imports.log"
    mods.mkdir()
    names = [f"biopb_slow_{i}" for i in range(5)]
    for name in names:
        (mods / f"{name}.py").write_text(SLOW_MODULE.format(log=str(log), name=name), encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", f"{mods}:{__import__('os').environ.get('PYTHONPATH', '')}")
    modules = json.dumps([*names, "biopb_no_such_module"])
    host = KernelHost(make_settings(tmp_path / "cfg", kernel=f"warm_imports = {modules}\nrequest_timeout = 20.0\n"))
    try:
        host.start()
        # a cell while the thread works: it starts no import until the cell has ended
        window = tmp_path / "cell.json"
        finish_ok(
            host,
            "import time, json\nt0 = time.time()\ntime.sleep(1.5)\n"
            f"open({str(window)!r}, 'w').write(json.dumps([t0, time.time()]))",
        )
        deadline = time.monotonic() + 60
        while (status := host.probes.query(STATUS)).get("seconds") is None:
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert status["done"] == names
        assert (
            list(status["failed"]) == ["biopb_no_such_module"]
            and "ModuleNotFoundError" in status["failed"]["biopb_no_such_module"]
        )
        t0, t1 = json.loads(window.read_text())
        starts = [float(line.split()[2]) for line in log.read_text().splitlines() if line.startswith("start")]
        assert len(starts) == len(names)  # each imported once, by the thread (no cell imported them)
        assert not [s for s in starts if t0 < s < t1], "an import began while the cell ran"
        # the cell finds them loaded
        assert "True" in rendered_text(finish_ok(host, f"import sys\nprint(all(n in sys.modules for n in {names!r}))"))
    finally:
        host.shutdown()


def test_no_thread_when_no_module_is_configured(tmp_path: Path) -> None:
    host = KernelHost(make_settings(tmp_path))  # the suite's configs set warm_imports = []
    try:
        host.start()
        status = host.probes.query(STATUS)
        assert status["modules"] == [] and status["seconds"] is None
        assert "False" in rendered_text(
            finish_ok(
                host, "import threading\nprint(any(t.name == 'biopb-warm-imports' for t in threading.enumerate()))"
            )
        )
    finally:
        host.shutdown()
