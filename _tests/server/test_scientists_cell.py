"""The scientist's cell comes first: the agent's code waits behind it, and interrupt_kernel
withdraws the agent's own request instead of interrupting that cell. A real server (in-process
MCP client), its own kernel, and the scientist's console as a second Jupyter client on it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest
from jupyter_client import BlockingKernelClient
from mcp import Client

from _tests.support.isolation import make_settings
from _tests.support.notebook_kernel import Ran
from _tests.support.results import text_of
from biopb_mcp.server import build_server
from biopb_mcp.text.kernel import parse_job_line

pytestmark = pytest.mark.anyio


class Console:
    """A console's Jupyter client on the agent's kernel, driven from one thread of its own."""

    def __init__(self, connection_file: str) -> None:
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="console")
        self.client: BlockingKernelClient = self._thread.submit(self._connect, connection_file).result()

    @staticmethod
    def _connect(connection_file: str) -> BlockingKernelClient:
        client = BlockingKernelClient()
        client.load_connection_file(connection_file)
        client.start_channels()
        client.wait_for_ready(timeout=60)
        return client

    def run(self, code: str) -> Ran:
        ran = Ran()
        self._thread.submit(lambda: self.client.execute_interactive(code, output_hook=ran.add, timeout=120)).result()
        return ran

    def close(self) -> None:
        def stop() -> None:
            self.client.stop_channels()
            with contextlib.suppress(RuntimeError):
                asyncio.get_event_loop_policy().get_event_loop().close()

        try:
            self._thread.submit(stop).result()
        finally:
            self._thread.shutdown(wait=True)


def blocking_cell(flag: Path) -> str:
    return (
        "import os, time\n"
        "print('scientist starts', flush=True)\n"
        f"while not os.path.exists({str(flag)!r}):\n"
        "    time.sleep(0.05)\n"
        "print('scientist done')"
    )


async def test_the_agent_waits_behind_the_consoles_cell_and_interrupt_withdraws_only_its_own(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path, kernel="promote_after = 1.0\nrequest_timeout = 30.0\n")
    mcp, state = build_server(settings)
    flag = tmp_path / "release"
    try:
        with anyio.fail_after(180):
            async with Client(mcp, mode="legacy") as client:
                assert not (await client.call_tool("start_kernel", {})).is_error
                status = json.loads(text_of(await client.call_tool("server_status", {})))
                console = await anyio.to_thread.run_sync(Console, status["kernel"]["connection_file"])
                ran: list[Ran] = []
                scientist = threading.Thread(target=lambda: ran.append(console.run(blocking_cell(flag))))
                scientist.start()
                try:
                    while state.kernel._client.cells.foreign is None:  # the server saw the cell begin
                        await anyio.sleep(0.05)
                    waiting = text_of(await client.call_tool("execute_code", {"code": "agent_ran = True"}))
                    job = parse_job_line(waiting)
                    assert job is not None and job.running, waiting
                    assert "waiting behind a cell from the console" in waiting and "import os, time" in waiting
                    assert "has not started" in waiting, waiting

                    stopped = text_of(await client.call_tool("interrupt_kernel", {}))
                    assert f"Withdrew {job.job_id}" in stopped and "none of it ran" in stopped, stopped
                    polled = text_of(await client.call_tool("poll_job", {"job_id": job.job_id}))
                    assert f"[{job.job_id}: interrupted]" in polled and "None of this code ran" in polled, polled
                    assert not ran  # the scientist's cell still runs
                finally:
                    flag.touch()
                    await anyio.to_thread.run_sync(scientist.join, 60)
                    await anyio.to_thread.run_sync(console.close)
                cell = ran[0]
                assert cell.error is None, cell.error  # no KeyboardInterrupt in the scientist's cell
                assert "scientist done" in cell.stdout
                assert f"the agent's {job.job_id} (agent_ran = True) waited behind it" in cell.stdout, cell.stdout
                assert "withdrew it, so none of it ran" in cell.stdout

                after = text_of(await client.call_tool("execute_code", {"code": "print('agent_ran' in globals())"}))
                assert "False" in after, after
                idle = text_of(await client.call_tool("interrupt_kernel", {}))
                assert idle.startswith("No code is running"), idle
    finally:
        state.kernel.shutdown()
