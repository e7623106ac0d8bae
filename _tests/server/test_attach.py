"""Attach mode end to end: a notebook's kernel (KernelManager, its own process, TCP on loopback),
an agent's server started from the command ``%load_ext biopb_mcp`` printed, over real stdio.

One notebook kernel and one server are shared by the module, in order: the tests that restart or
end the notebook's kernel come last.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

from _tests.support.notebook_kernel import NotebookKernel, isolated_env
from _tests.support.processes import wait_gone
from _tests.support.results import job_output, printed, text_of
from _tests.support.runner import run_to_end, run_to_end_raw
from _tests.support.stdio_procs import RawServer, result_text

pytestmark = pytest.mark.anyio

CONFIG = "[kernel]\npromote_after = 2.0\nrequest_timeout = 20.0\n"
"""A short promote_after, so the interrupt test's long loop becomes a job at once; any other call
may become one too on a loaded machine, so the tests follow those to their end (run_to_end)."""
GOOD_PLUGIN = "PLUGIN_VALUE = 41\n"
BAD_PLUGIN = "raise RuntimeError('this plugin is broken')\n"


@dataclass
class World:
    root: Path
    env: dict[str, str]
    notebook: NotebookKernel


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("attach")
    env = isolated_env(root, extra_config=CONFIG)
    (root / "config" / "kernel").mkdir()
    (root / "config" / "kernel" / "good.py").write_text(GOOD_PLUGIN)  # not pushed: existing_plugins is off
    jupyter_rt = root / "jupyter-runtime"
    jupyter_rt.mkdir(mode=0o700)
    env = {**env, "JUPYTER_RUNTIME_DIR": str(jupyter_rt)}
    notebook = NotebookKernel(env, jupyter_rt / "kernel-notebook.json")
    try:
        yield World(root, env, notebook)
    finally:
        notebook.close()


@pytest.fixture(scope="module")
async def agent(world: World) -> AsyncIterator[Client]:
    """The agent's server, launched exactly as the JSON config line %load_ext printed says."""
    printed = world.notebook.run("%load_ext biopb_mcp").stdout
    entry = json.loads(next(line for line in printed.splitlines() if line.strip().startswith("{")))
    entry = entry["mcpServers"]["biopb"]
    # a checkout run with PYTHONPATH (a worktree beside an installed copy) serves that checkout
    path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**world.env, **path, **entry.get("env", {})}
    )
    async with Client(params, mode="legacy", read_timeout_seconds=90) as client:
        yield client


async def call(client: Client, tool: str, **arguments: object) -> CallToolResult:
    with anyio.fail_after(90):
        return await client.call_tool(tool, arguments)


def until(read: Callable[[], str], wanted: str, within: float = 60.0) -> str:
    """``read()`` until it contains ``wanted`` (or ``within`` seconds passed); its last value."""
    deadline = time.monotonic() + within
    while wanted not in (text := read()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert wanted in text, text
    return text


async def status(client: Client) -> dict[str, object]:
    return json.loads(text_of(await call(client, "server_status")))["kernel"]


async def test_the_printed_command_attaches_and_the_namespace_is_shared(world: World, agent: Client) -> None:
    world.notebook.run("cells = [3, 4, 5]")
    started = await call(agent, "start_kernel")
    assert not started.is_error, text_of(started)
    assert "attached" in text_of(started).lower()
    assert (
        world.notebook.run("print('PLUGIN_VALUE' in dir(), '__biopb_bootstrap__' in dir())").stdout == "False False\n"
    )
    ran = await run_to_end(agent, "print(sum(cells)); agent_mean = 2.5")
    assert job_output(ran).strip() == "12", text_of(ran)
    assert world.notebook.run("print(agent_mean * 2)").stdout == "5.0\n"
    again = await call(agent, "start_kernel")  # idempotent: still the same kernel, namespace kept
    assert not again.is_error and "already" in text_of(again).lower()


async def test_the_scientists_cells_never_reach_the_agent(world: World, agent: Client) -> None:
    code = "import time\nfor i in range(8):\n    print('scientist-was-here', flush=True)\n    time.sleep(0.1)\n"
    notebook_ran: list[str] = []
    scientist = threading.Thread(target=lambda: notebook_ran.append(world.notebook.run(code).stdout))
    scientist.start()
    try:
        ran = await run_to_end(agent, "print('agent-output')")  # may wait behind the scientist's cell
    finally:
        scientist.join(60)
    assert "agent-output" in text_of(ran) and "scientist" not in text_of(ran), text_of(ran)
    assert notebook_ran and "agent-output" not in notebook_ran[0]
    assert notebook_ran[0].count("scientist-was-here") == 8


async def test_status_log_and_pause_from_the_notebook(world: World, agent: Client) -> None:
    nb = world.notebook
    await run_to_end(agent, "logged = 6 * 7\nprint('the answer', logged)")
    # the server writes its note and the session notebook off the call's path: allow them a moment
    st = until(lambda: nb.run("%biopb status").stdout, "logged = 6 * 7")
    assert "Agent attached" in st and "the kernel stays yours" in st, st
    log = until(lambda: nb.run("%biopb log 1").stdout, "logged = 6 * 7")
    assert "the answer 42" in log, log
    assert "Paused" in nb.run("%biopb pause checking the masks").stdout
    paused = await call(agent, "execute_code", code="touched_while_paused = True")
    assert paused.is_error and paused.structured_content is None and "Paused by the scientist" in text_of(paused)
    assert "checking the masks" in text_of(paused) and "%biopb resume" in text_of(paused)
    assert "Traceback" not in text_of(paused)
    assert "NameError" in str(nb.run("touched_while_paused").error)
    assert "Resumed" in nb.run("%biopb resume").stdout
    ran = await run_to_end(agent, "print('running again')")
    assert "running again" in text_of(ran)


async def test_restart_and_shutdown_belong_to_the_frontend(world: World, agent: Client) -> None:
    refused = await call(agent, "restart_kernel")
    assert refused.is_error and "belongs to its frontend" in text_of(refused)
    assert world.notebook.run("print(len(cells))").stdout == "3\n"  # nothing was lost
    kernel = await status(agent)
    assert kernel["mode"] == "attached" and kernel["state"] == "ready"
    assert kernel["connection_file"] == str(world.notebook.connection_file.resolve())
    assert "frontend" in str(kernel["owner"])


async def test_interrupt_stops_the_agents_job_and_keeps_the_kernel(world: World, agent: Client) -> None:
    started = await call(agent, "execute_code", code="import time\nfor _ in range(600): time.sleep(0.1)")
    assert "Paused" not in text_of(started)
    assert "job-" in text_of(started), text_of(started)
    stopped = await call(agent, "interrupt_kernel")
    assert "interrupted" in text_of(stopped).lower(), text_of(stopped)
    assert world.notebook.run("print(sum(cells))").stdout == "12\n"
    ran = await run_to_end(agent, "print('still here')")
    assert "still here" in text_of(ran)


async def test_interrupt_withdraws_the_agents_request_and_leaves_the_notebooks_cell(
    world: World, agent: Client
) -> None:
    """While the scientist's cell runs, the agent is told it waits behind it; interrupt_kernel
    withdraws the agent's request, and the notebook cell ends normally, saying so."""
    flag = world.root / "release-notebook-cell"
    code = f"import os, time\nwhile not os.path.exists({str(flag)!r}):\n    time.sleep(0.05)\nprint('scientist done')"
    cell: list[Any] = []
    scientist = threading.Thread(target=lambda: cell.append(world.notebook.run(code, timeout=120)))
    scientist.start()
    try:
        with anyio.fail_after(60):
            while (await status(agent)).get("other_cell") is None:  # the server saw the cell begin
                await anyio.sleep(0.05)
        waiting = text_of(await call(agent, "execute_code", code="withdrawn_value = 1"))
        assert "waiting behind a cell from the notebook" in waiting and "import os, time" in waiting, waiting
        stopped = text_of(await call(agent, "interrupt_kernel"))
        assert "Withdrew job-" in stopped and "none of it ran" in stopped, stopped
    finally:
        flag.touch()
        await anyio.to_thread.run_sync(scientist.join, 60)
    ran = cell[0]
    assert ran.error is None, ran.error  # no KeyboardInterrupt in the scientist's cell
    assert "scientist done" in ran.stdout and "(withdrawn_value = 1) waited behind it" in ran.stdout, ran.stdout
    assert "NameError" in str(world.notebook.run("withdrawn_value").error)


def test_a_copied_connection_file_found_by_lookup_and_sigkill_leaves_the_kernel(world: World) -> None:
    """--existing with no file takes the newest in Jupyter's runtime dir (here: a copy, as scp
    makes it for a tunnelled kernel); with kernel.existing_plugins the plugins load, a broken one
    is reported; killing that server with SIGKILL leaves the kernel be."""
    lookup_rt = world.root / "lookup-runtime"
    lookup_rt.mkdir(mode=0o700)
    shutil.copy(world.notebook.connection_file, lookup_rt / "kernel-hpc.json")
    other = world.root / "other-config"
    env = {
        **isolated_env(other, extra_config="[kernel]\nexisting_plugins = true\n"),
        "JUPYTER_RUNTIME_DIR": str(lookup_rt),
    }
    (other / "config" / "kernel").mkdir()
    (other / "config" / "kernel" / "good.py").write_text(GOOD_PLUGIN)
    (other / "config" / "kernel" / "bad.py").write_text(BAD_PLUGIN)
    server = RawServer(env, world.root / "lookup-server.err", "--existing")
    try:
        server.initialize()
        started = server.call("start_kernel", timeout=90)
        assert not started.get("isError"), result_text(started)
        assert "kernel-hpc.json" in result_text(started)
        assert "good.py" in result_text(started) and "this plugin is broken" in result_text(started)
        ran = run_to_end_raw(server, "print(cells[0], PLUGIN_VALUE)")
        assert printed(result_text(ran)).strip() == "3 41"
        guard = world.notebook.run(
            "import os; print(__biopb_bootstrap__['shutdown_guard'], [k for k in os.environ if 'BIOPB_MCP' in k])"
        )
        assert guard.stdout == "False []\n"  # the kernel's shutdown stays its frontend's; its env is as it was
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
    finally:
        server.close()
    assert world.notebook.is_alive()
    assert world.notebook.run("print(cells[-1])").stdout == "5\n"


async def test_a_frontend_restart_is_rejoined_by_start_kernel(world: World, agent: Client) -> None:
    world.notebook.restart()
    with anyio.fail_after(60):
        while (await status(agent))["state"] == "ready":
            await anyio.sleep(0.2)
    gone = await call(agent, "execute_code", code="print(1)")
    assert gone.is_error and "start_kernel" in text_of(gone), text_of(gone)
    rejoined = await call(agent, "start_kernel")
    assert not rejoined.is_error, text_of(rejoined)
    ran = await run_to_end(agent, "print('cells' in dir())")
    assert job_output(ran).strip() == "False"  # the namespace is the new kernel's
    world.notebook.run("fresh = 1")
    assert job_output(await run_to_end(agent, "print(fresh)")).strip() == "1"


async def test_a_kernel_that_exits_is_reported_gone(world: World, agent: Client) -> None:
    pid = world.notebook.pid
    world.notebook.shutdown()
    assert wait_gone(pid, 30)
    with anyio.fail_after(60):
        while (kernel := await status(agent))["state"] == "ready":
            await anyio.sleep(0.2)
    assert kernel["state"] == "gone", kernel
    ran = await call(agent, "execute_code", code="print(1)")
    assert ran.is_error and "gone" in text_of(ran) and "start_kernel" in text_of(ran)
    again = await call(agent, "start_kernel")
    assert again.is_error and "--existing" in text_of(again), text_of(again)
    assert os.path.exists(world.root)  # nothing of the notebook's was removed by the server


def test_an_empty_existing_file_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from biopb_mcp.cli.commands import main

    assert main(["--existing", ""]) == 2
    assert "--existing takes a connection file" in capsys.readouterr().err
