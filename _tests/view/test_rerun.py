"""Re-running a recorded session with the README's command, as written, in a plain kernel.

The session holds what real ones hold: a cell that used a kernel plugin's name, an error, a job
the agent interrupted, and a name the scientist typed in a console (another Jupyter client on the
same kernel) that a later agent cell read.
"""

from __future__ import annotations

import json
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import nbformat
import pytest

from _tests.support.results import text_of
from _tests.support.runner import run_to_end
from _tests.support.view_helpers import recording_server
from biopb_mcp.kernel.notebook import agent_cells, read_session

REPO = Path(__file__).resolve().parents[2]

PLUGIN = "import os\nprint('plugin', callable(dask_client), os.getpid())"
FAILS = "ratio = 1 / 0"
STOPPED = "import pathlib, time\npathlib.Path('stopped-job-ran').touch()\nfor _ in range(600):\n    time.sleep(0.1)"
CONSOLE = "z = 5"
READS_CONSOLE = "print('from the console', z * 2)"
LAST = "print('the end')"

CONSOLE_CLIENT = """
import sys
from jupyter_client import BlockingKernelClient
client = BlockingKernelClient()
client.load_connection_file(sys.argv[1])
client.start_channels()
print(client.execute_interactive(sys.argv[2], timeout=60)["content"]["status"])
client.stop_channels()
"""


def readme_rerun_command() -> str:
    """The re-run command exactly as the README shows it (its comment dropped)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [line for line in readme.splitlines() if "jupyter execute" in line and "<file>" in line]
    assert len(lines) == 1, lines
    return lines[0].split("  #")[0].strip()


async def record(root: Path) -> Path:
    with anyio.fail_after(180):
        async with recording_server(root, "[kernel]\npromote_after = 1.0\n") as (client, _state):
            await client.call_tool("start_kernel", {})  # in root/data: the re-run must start there too
            status = json.loads(text_of(await client.call_tool("server_status", {})))
            # promote_after is short so STOPPED becomes a job at once; any other cell may become
            # one on a loaded machine, so each is followed to its end before the next is sent
            for code in (PLUGIN, FAILS):
                await run_to_end(client, code)
            job = text_of(await client.call_tool("execute_code", {"code": STOPPED}))
            assert "job-" in job, job
            while not (root / "data" / "stopped-job-ran").exists():
                await anyio.sleep(0.05)
            assert "interrupted" in text_of(await client.call_tool("interrupt_kernel", {})).lower()
            # the scientist types a name in a console (another client, another process)
            typed = await anyio.run_process(
                [sys.executable, "-c", CONSOLE_CLIENT, status["kernel"]["connection_file"], CONSOLE]
            )
            assert typed.stdout.decode().strip() == "ok", typed
            for code in (READS_CONSOLE, LAST):
                await run_to_end(client, code)
    return Path(status["kernel"]["session_notebook"])


@pytest.fixture(scope="module")
def rerun(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("rerun")
    (root / "data").mkdir()
    path = anyio.run(record, root)
    (root / "data" / "stopped-job-ran").unlink()
    command = readme_rerun_command().replace("<file>", shlex.quote(str(path)))
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=600, cwd=root)
    out = path.with_name(f"{path.stem}-rerun.ipynb")
    return {"root": root, "recorded": read_session(path), "done": done, "out": out, "session": path}


def stdout_of(cell: Any) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_the_readme_command_re_runs_the_whole_session_in_a_plain_kernel(rerun: dict[str, Any]) -> None:
    done = rerun["done"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    nb = nbformat.read(str(rerun["out"]), as_version=4)
    setup = nb.cells[1]
    assert setup.metadata.biopb.setup and not [o for o in setup.outputs if o.output_type == "error"], setup
    cells = {c.source.splitlines()[-1]: c for c in agent_cells(nb)}
    recorded = {c.source.splitlines()[-1]: c for c in agent_cells(rerun["recorded"])}

    # the plugin's name is there again (loaded by the first cell), in a new kernel
    plugin = stdout_of(cells[PLUGIN.splitlines()[-1]]).split()
    assert plugin[:2] == ["plugin", "True"]
    assert plugin[2] != stdout_of(recorded[PLUGIN.splitlines()[-1]]).split()[2]
    # the agent's error happens again and the run goes on past it
    (error,) = cells[FAILS].outputs
    assert error.output_type == "error" and error.ename == "ZeroDivisionError"
    # the interrupted job is kept, with what it showed, and not started again
    stopped = cells[STOPPED.splitlines()[-1]]
    assert "skip-execution" in stopped.metadata.tags and stopped.metadata.biopb.status == "interrupted"
    assert stopped.source.startswith("# biopb-mcp: interrupted") and stopped.source.endswith(STOPPED)
    assert not (rerun["root"] / "data" / "stopped-job-ran").exists()
    assert [o.get("ename") for o in stopped.outputs] == ["KeyboardInterrupt"]
    # the console's name: named in the first cell, and the cell that read it fails without stopping the run
    assert re.search(r"#\s+z\b", setup.source), setup.source
    reads = cells[READS_CONSOLE]
    assert reads.metadata.biopb.outside_names == ["z"] and "raises-exception" in reads.metadata.tags
    assert [o.get("ename") for o in reads.outputs] == ["NameError"]
    assert stdout_of(cells[LAST]) == "the end\n"


def test_the_re_run_is_private_as_the_session_is(rerun: dict[str, Any]) -> None:
    """The re-run holds the session's data and outputs: as readable to others as the session, no more."""
    assert rerun["done"].returncode == 0, rerun["done"].stderr[-3000:]
    assert stat.S_IMODE(rerun["session"].stat().st_mode) == 0o600
    assert stat.S_IMODE(rerun["out"].stat().st_mode) == 0o600


def test_the_recorded_session_ran_as_the_agent_saw_it(rerun: dict[str, Any]) -> None:
    cells = {c.source.splitlines()[-1]: c for c in agent_cells(rerun["recorded"])}
    assert stdout_of(cells[READS_CONSOLE]) == "from the console 10\n"
    assert "raises-exception" in cells[FAILS].metadata.tags
    assert "tags" not in cells[LAST].metadata
