"""Kernel faults through the real server over stdio.

The kernel killed from outside in the middle of a job, a job flooding stdout, a job allocating
until it cannot (capped with RLIMIT_AS inside the kernel: the machine's memory is never at risk),
``input()`` in agent code, and a kernel spec that does not exist. Each gives a clear status, the
server never hangs (every call sits under ``anyio.fail_after``), start_kernel recovers where it can.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from _tests.support.raw_server import write_config
from _tests.support.rel_helpers import stdio_params
from _tests.support.runner import run_to_end as finish_call

pytestmark = pytest.mark.anyio

CALL_BOUND = 60.0
"""No single tool call may take longer (startup_timeout and request_timeout are 30 s here)."""

MAX_OUTPUT = 2000
JOB = re.compile(r"\bjob-\d+\b")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def call(client: Client, tool: str, args: dict[str, object] | None = None) -> CallToolResult:
    with anyio.fail_after(CALL_BOUND):
        return await client.call_tool(tool, args or {})


async def status(client: Client) -> dict[str, object]:
    return json.loads(_text(await call(client, "server_status")))["kernel"]


async def run_to_end(client: Client, code: str) -> tuple[CallToolResult, str]:
    """The shared runner's result, with its text."""
    result = await finish_call(client, code)
    return result, _text(result)


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    root = tmp_path_factory.mktemp("kfaults")
    env = write_config(
        root,
        f"[kernel]\npromote_after = 2.0\nmax_output_chars = {MAX_OUTPUT}\nstartup_timeout = 30.0\nrequest_timeout = 20.0\n",
    )
    async with Client(stdio_params(env), mode="legacy", read_timeout_seconds=CALL_BOUND) as c:
        result = await call(c, "start_kernel")
        assert not result.is_error, _text(result)
        yield c


async def test_flooding_stdout_is_bounded(client: Client, counts: Counter[str]) -> None:
    _result, text = await run_to_end(
        client, "import sys\nfor i in range(200000):\n    sys.stdout.write('spam line %d\\n' % i)\n"
    )
    assert len(text) < MAX_OUTPUT + 1000, len(text)
    assert "spam line 0" in text and re.search(r"truncat|more|offset", text, re.IGNORECASE), text[-500:]
    counts["kernel faults injected"] += 1


async def test_input_is_refused_without_hanging(client: Client, counts: Counter[str]) -> None:
    result, text = await run_to_end(client, "answer = input('name? ')")
    assert result.is_error and "input()" in text and "stdin" in text, text
    _ok, text = await run_to_end(client, "print(6 * 7)")
    assert "42" in text
    counts["kernel faults injected"] += 1


async def test_allocating_until_it_fails_is_reported(client: Client, counts: Counter[str]) -> None:
    code = (
        "import resource, re\n"
        "vm = int(re.search(r'VmSize:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) * 1024\n"
        "limit = vm + (1 << 30)  # at most 1 GB more than the kernel holds now\n"
        "resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "blocks = []\n"
        "while True:\n"
        "    blocks.append(bytearray(64 << 20))\n"
    )
    result, text = await run_to_end(client, code)
    kernel = await status(client)
    counts[f"memory fault outcome: kernel {kernel['state']}"] += 1
    if kernel["state"] == "ready":
        assert result.is_error and "MemoryError" in text, text[-800:]
    else:  # it died of it: the status says so, and the call said so too
        assert kernel["state"] == "dead" and "died" in text, (kernel, text[-800:])
    # The limit lives in the kernel process: restart to drop it, and check it works again.
    restarted = await call(client, "restart_kernel")
    assert not restarted.is_error and "lost" in _text(restarted), _text(restarted)
    _ok, text = await run_to_end(client, "bytearray(256 << 20) and print('room again')")
    assert "room again" in text, text
    counts["kernel faults injected"] += 1


async def test_kernel_killed_mid_job_then_start_kernel_recovers(client: Client, counts: Counter[str]) -> None:
    assert not (await call(client, "start_kernel")).is_error
    await run_to_end(client, "kept = 1")  # to its end: a job still running would make the next call busy
    first = await call(client, "execute_code", {"code": "import time\ntime.sleep(120)"})
    job = JOB.search(_text(first))
    assert job and _text(first).startswith("Still running"), _text(first)
    pid = (await status(client))["pid"]
    assert isinstance(pid, int) and pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    with anyio.fail_after(30):
        while (await status(client))["state"] != "dead":
            await anyio.sleep(0.2)
    polled = await call(client, "poll_job", {"job_id": job.group(0)})
    assert "died" in _text(polled), _text(polled)
    refused = await call(client, "execute_code", {"code": "1 + 1"})
    assert refused.is_error and "dead" in _text(refused) and "start_kernel" in _text(refused), _text(refused)
    recovered = await call(client, "start_kernel")
    assert not recovered.is_error, _text(recovered)
    assert (await status(client))["state"] == "ready"
    ok, text = await run_to_end(client, "print(1 + 1)")
    assert not ok.is_error and "2" in text
    counts["kernel faults injected"] += 1


async def test_a_kernel_spec_that_does_not_exist(tmp_path: Path, counts: Counter[str]) -> None:
    env = write_config(tmp_path, '[kernel]\nname = "no-such-kernel-spec-xyz"\nstartup_timeout = 20.0\n')
    with anyio.fail_after(2 * CALL_BOUND):
        async with Client(stdio_params(env), mode="legacy", read_timeout_seconds=CALL_BOUND) as c:
            started = await call(c, "start_kernel")
            text = _text(started)
            assert started.is_error and "no-such-kernel-spec-xyz" in text, text
            assert (await status(c))["state"] == "error"
            refused = await call(c, "execute_code", {"code": "1"})
            assert refused.is_error and "start_kernel" in _text(refused), _text(refused)
            again = await call(c, "start_kernel")  # still no hang, same clear answer
            assert again.is_error and "no-such-kernel-spec-xyz" in _text(again)
    counts["kernel faults injected"] += 1
