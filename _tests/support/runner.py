"""The one way tests run code in a real kernel: through the host (in-process) or through an MCP
client (as an agent does, following a job by its job line to the end).

A bound on each wait is generous on purpose: it only stops a hung test; what a test asserts is
the outcome, never how long it took.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
from mcp import Client
from mcp.types import CallToolResult, TextContent

from _tests.support.raw_server import RawServer, result_text
from biopb_mcp.kernel import Execution, KernelHost, Rendered
from biopb_mcp.text.kernel import parse_job_line, rendered_text

__all__ = ["finish", "finish_ok", "run_text", "run_to_end", "run_to_end_raw"]

BOUND = 90.0
"""Seconds a test waits for one cell before calling it hung."""


def finish(host: KernelHost, code: str, timeout: float = BOUND) -> tuple[Execution, Rendered]:
    """Run ``code`` to its end in the host's kernel: the execution and its first page."""
    ex = host.jobs.submit(code)
    assert host.jobs.wait(ex, timeout), f"{code!r} did not finish within {timeout:g} s"
    return ex, host.jobs.render(ex)


def finish_ok(host: KernelHost, code: str, timeout: float = BOUND) -> Rendered:
    """:func:`finish`, asserting the code ran without an error."""
    ex, page = finish(host, code, timeout)
    assert ex.status == "ok", rendered_text(page)
    return page


def run_text(host: KernelHost, code: str, timeout: float = BOUND) -> str:
    """The text an execution shows (its first page), whatever its status."""
    return rendered_text(finish(host, code, timeout)[1])


async def run_to_end(client: Client, code: str, bound: float = BOUND) -> CallToolResult:
    """execute_code, then poll_job until the job line says it ended: what any client must do."""
    result = await client.call_tool("execute_code", {"code": code})
    with anyio.fail_after(bound):
        while (line := parse_job_line(_text(result))) is not None and line.running:
            await anyio.sleep(0.05)
            result = await client.call_tool("poll_job", {"job_id": line.job_id})
    return result


def run_to_end_raw(server: RawServer, code: str, bound: float = BOUND) -> dict[str, Any]:
    """:func:`run_to_end` over the raw JSON-RPC wire (a server spoken to line by line)."""
    deadline = time.monotonic() + bound
    result = server.call("execute_code", {"code": code}, timeout=bound)
    while (line := parse_job_line(result_text(result))) is not None and line.running:
        assert time.monotonic() < deadline, f"{line.job_id} still running after {bound:g} s"
        time.sleep(0.05)
        result = server.call("poll_job", {"job_id": line.job_id})
    return result


def _text(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))
