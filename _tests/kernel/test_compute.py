"""Dask in the kernel with real processes: a local cluster in the kernel's group, an attached
scheduler, interrupts, restarts, an unreachable address and a SIGKILLed server."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client
from mcp.types import TextContent

from _tests.support.isolation import make_settings
from _tests.support.results import output_of
from _tests.support.runner import finish
from _tests.support.stdio_procs import RawServer, make_env
from biopb_mcp.config.settings import Settings
from biopb_mcp.kernel import KernelHost, compute
from biopb_mcp.server import build_server
from biopb_mcp.text import kernel as kernel_text
from biopb_mcp.text.kernel import rendered_text

REPO = Path(__file__).resolve().parents[2]


def compute_settings(root: Path, compute_toml: str) -> Settings:
    settings = make_settings(root, kernel="request_timeout = 20.0\n")
    cfile = settings.config_file
    cfile.write_text(cfile.read_text(encoding="utf-8") + "[compute]\n" + compute_toml, encoding="utf-8")
    from biopb_mcp.config.settings import load_settings

    return load_settings(settings.config_dir)


def run(host: KernelHost, code: str, timeout: float = 90.0) -> tuple[str, str]:
    """(status, text) of ``code`` run to the end in the host's kernel."""
    ex, page = finish(host, code, timeout)
    return ex.status, rendered_text(page)


def value(host: KernelHost, expression: str) -> Any:
    status, text = run(host, f"print(__import__('json').dumps({expression}))")
    assert status == "ok", text
    return json.loads(text.strip().splitlines()[-1])


def wait_until(predicate: Any, within: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def all_gone(pids: list[int]) -> bool:
    return not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- none: the default costs nothing ----------------------------------------------------------------


def test_default_kernel_imports_no_dask_and_says_how_to_configure_a_cluster(tmp_path: Path) -> None:
    host = KernelHost(make_settings(tmp_path))
    try:
        host.start()
        assert value(host, "sorted(m for m in ('dask', 'distributed') if m in __import__('sys').modules)") == []
        status, text = run(host, "dask_client()")
        assert status == "error"
        assert "ComputeUnavailable" in text and 'scheduler = "local"' in text and "config.toml" in text
        run(host, "%reset -f")  # the helper outlives a namespace reset
        assert value(host, "callable(dask_client)") is True
        section = compute_status(host)
        assert section["mode"] == "none" and section["started"] is False
        # dask_client() raises in this mode: "not started ... starts on first use" would be false
        assert section["state"].startswith("off: no cluster is configured") and "not started" not in section["state"]
    finally:
        host.shutdown()


# -- local cluster ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelHost]:
    root = tmp_path_factory.mktemp("local")
    host = KernelHost(
        compute_settings(root, 'scheduler = "local"\nworkers = 2\nthreads_per_worker = 1\nmemory_limit = "300MB"\n')
    )
    host.start()
    try:
        yield host
    finally:
        host.shutdown()


def worker_pids(host: KernelHost) -> list[int]:
    return sorted(
        value(host, "[w['pid'] for w in dask_client().run(lambda: {'pid': __import__('os').getpid()}).values()]")
    )


def test_local_cluster_starts_on_first_use_inside_the_kernels_process_group(local_host: KernelHost) -> None:
    before = compute_status(local_host)
    assert before["mode"] == "local" and before["started"] is False
    assert before["state"] == "not started: the first dask_client() call starts a local cluster in the kernel"
    status, text = run(
        local_host,
        "import dask.array as da\nc = dask_client()\nprint(int(da.ones((2000, 2000), chunks=500).sum().compute()))",
    )
    assert status == "ok", text
    assert text.strip().endswith("4000000")
    pids = worker_pids(local_host)
    assert len(pids) == 2
    kernel_pid = int(local_host.status().pid or 0)
    assert {os.getpgid(p) for p in pids} == {os.getpgid(kernel_pid)}
    after = compute_status(local_host)
    assert after["started"] is True and after["state"] == "running"
    link = value(local_host, "dask_client().dashboard_link")
    assert link.startswith("http://127.0.0.1:")
    assert after["dashboard"].startswith(link)  # never null while the client has a link
    if importlib.util.find_spec("bokeh") is None:
        assert "bokeh is missing" in after["dashboard"], after["dashboard"]
    assert after["workers"] == 2 and after["threads"] == 2
    assert after["memory_limit_bytes"] == 2 * 300_000_000
    assert after["address"].startswith("tcp://127.0.0.1:")
    assert after["tasks_in_flight"] == 0


def test_interrupt_during_compute_cancels_the_clusters_tasks_and_keeps_the_workers(
    local_host: KernelHost, tmp_path: Path
) -> None:
    pids = worker_pids(local_host)
    gathering = tmp_path / "gathering"
    code = (
        "import time, dask\n"
        "c = dask_client()\n"
        "futs = c.compute([dask.delayed(time.sleep)(1.0, dask_key_name=f'nap-{i}') for i in range(400)])\n"
        f"open({str(gathering)!r}, 'w').close()\n"
        "c.gather(futs)\n"
    )
    ex = local_host.jobs.submit(code)
    # interrupt only once the futures exist: an earlier interrupt stops the cell before it submits anything
    assert wait_until(gathering.exists, within=60.0)
    # tasks the scheduler still has to run (results computed before the interrupt stay in memory)
    count = (
        "dask_client().run_on_scheduler(lambda dask_scheduler: sum(ts.state not in "
        "('memory', 'erred', 'released', 'forgotten') for ts in dask_scheduler.tasks.values()))"
    )
    assert not local_host.jobs.wait(ex, 3.0)
    local_host.interrupt()
    assert local_host.jobs.wait(ex, 60.0)  # the host waits 10 s at most; a loaded machine may need more
    assert ex.status == "interrupted", rendered_text(local_host.jobs.render(ex))
    assert "AllExit" not in rendered_text(local_host.jobs.render(ex))
    # the user still holds `futs`: without the cancel on interrupt the naps (200 s of them on two
    # workers) would still run long past this generous bound
    assert wait_until(lambda: value(local_host, count) == 0, within=60.0), value(local_host, count)
    assert value(local_host, "[f.status for f in futs]").count("pending") == 0
    assert worker_pids(local_host) == pids  # the SIGINT to the kernel's group spared the workers
    status, text = run(local_host, "print(dask_client().submit(sum, [1, 2]).result())")
    assert status == "ok" and text.strip() == "3"


def test_restart_ends_the_local_cluster(local_host: KernelHost) -> None:
    pids = worker_pids(local_host)
    local_host.restart()
    assert wait_until(lambda: all_gone(pids), within=10.0)
    assert value(local_host, "'distributed' in __import__('sys').modules") is False


# -- attached to an existing scheduler --------------------------------------------------------------


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A real `dask scheduler` and one `dask worker` on loopback, as their own processes."""
    address = f"tcp://127.0.0.1:{free_port()}"
    log = (tmp_path / "dask.log").open("wb")
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    sched = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            address.rsplit(":", 1)[1],
            "--no-dashboard",
        ],
        stdout=log,
        stderr=log,
        env=env,
        start_new_session=True,
    )
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            address,
            "--host",
            "127.0.0.1",
            "--nthreads",
            "1",
            "--no-nanny",
            "--no-dashboard",
        ],
        stdout=log,
        stderr=log,
        env=env,
        start_new_session=True,
    )
    try:
        yield address, worker
    finally:
        for proc in (worker, sched):
            proc.kill()
            proc.wait(10)
        log.close()


@pytest.mark.anyio
async def test_attached_kernel_runs_its_computation_on_the_external_worker(
    scheduler: tuple[str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    address, worker = scheduler
    settings = compute_settings(tmp_path, f'scheduler = "{address}"\nconnect_timeout = 30.0\n')
    settings = replace(settings, kernel=replace(settings.kernel, promote_after=120.0))
    mcp, state = build_server(settings)
    try:
        with anyio.fail_after(150):
            async with Client(mcp) as client:
                await client.call_tool("start_kernel", {})
                status = json.loads(_text(await client.call_tool("server_status", {})))
                assert status["compute"]["mode"] == "attached"
                assert status["compute"]["state"] == f"not started: the first dask_client() call connects to {address}"
                result = await client.call_tool(
                    "execute_code",
                    {
                        "code": (
                            "import os, time\n"
                            "c = dask_client()\n"
                            "while not c.scheduler_info()['workers']:\n"
                            "    time.sleep(0.1)\n"
                            "print(c.submit(os.getpid, pure=False).result())"
                        )
                    },
                )
                assert not result.is_error, _text(result)
                assert int(output_of(result).strip().splitlines()[-1]) == worker.pid
                status = json.loads(_text(await client.call_tool("server_status", {})))
                section = status["compute"]
                assert section["state"] == "running" and section["address"] == address
                assert section["workers"] == 1 and section["threads"] == 1
    finally:
        state.kernel.shutdown()


def test_unreachable_scheduler_fails_fast_naming_the_address_and_the_kernel_stays_usable(tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    host = KernelHost(compute_settings(tmp_path, f'scheduler = "{address}"\nconnect_timeout = 1.0\n'))
    try:
        host.start()
        status, text = run(host, "dask_client()", timeout=30.0)
        assert status == "error"
        assert "ComputeUnavailable" in text and address in text and "did not answer within 1 s" in text
        assert run(host, "1+1") == ("ok", "2")
    finally:
        host.shutdown()


def compute_status(host: KernelHost) -> dict[str, Any]:
    """server_status's compute section for ``host``, as the agent reads it."""
    return kernel_text.compute_status(
        compute.status_section(
            host._settings, host.probes.query_when_idle(compute.STATUS_EXPRESSION), host.state, busy=False
        )
    )


@pytest.mark.anyio
async def test_restart_kernel_applies_a_changed_compute_section_and_a_bad_file_changes_nothing(
    tmp_path: Path,
) -> None:
    settings = compute_settings(tmp_path, 'scheduler = "none"\n')
    cfile = settings.config_file
    mcp, state = build_server(settings)

    async def compute_section(client: Client) -> dict[str, Any]:
        return dict(json.loads(_text(await client.call_tool("server_status", {})))["compute"])

    try:
        with anyio.fail_after(180):
            async with Client(mcp) as client:
                await client.call_tool("start_kernel", {})
                assert (await compute_section(client))["mode"] == "none"
                cfile.write_text(cfile.read_text(encoding="utf-8").replace('"none"', '"local"'), encoding="utf-8")
                restarted = await client.call_tool("restart_kernel", {})
                assert not restarted.is_error, _text(restarted)
                section = await compute_section(client)
                # the kernel's own plugin reports it: the new kernel was given the new section
                assert section["mode"] == "local" and section["scheduler"] == "local", section
                pid = json.loads(_text(await client.call_tool("server_status", {})))["kernel"]["pid"]
                cfile.write_text(cfile.read_text(encoding="utf-8").replace('"local"', '"bogus"'), encoding="utf-8")
                refused = await client.call_tool("restart_kernel", {})
                assert refused.is_error and "compute.scheduler" in _text(refused), _text(refused)
                assert "nothing was started or restarted" in _text(refused)
                after = json.loads(_text(await client.call_tool("server_status", {})))
                assert after["kernel"]["pid"] == pid and after["compute"]["mode"] == "local"
                assert state.settings.compute.scheduler == "local"
    finally:
        state.kernel.shutdown()


def _text(result: Any) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


# -- the server dies ------------------------------------------------------------------------------


def test_sigkilled_server_leaves_no_kernel_or_worker_process(tmp_path: Path) -> None:
    env = make_env(
        tmp_path,
        config='[kernel]\npromote_after = 120.0\n[compute]\nscheduler = "local"\nworkers = 1\nthreads_per_worker = 1\n',
    )
    server = RawServer(env, tmp_path / "stderr.log")
    try:
        server.initialize()
        server.call("start_kernel", timeout=120)
        out = server.call(
            "execute_code", {"code": "c = dask_client()\nprint(len(c.scheduler_info()['workers']))"}, timeout=120
        )
        assert not out.get("isError"), out
        status = json.loads(server.call("server_status")["content"][0]["text"])
        kernel = psutil.Process(status["kernel"]["pid"])
        family = [kernel.pid, *(p.pid for p in kernel.children(recursive=True))]
        assert len(family) >= 2, family  # the kernel and at least its worker
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        # the kernel never ends by itself: only its lifeline ends the family within this bound
        assert wait_until(lambda: all_gone(family), within=30.0), [p for p in family if psutil.pid_exists(p)]
    finally:
        server.close()
