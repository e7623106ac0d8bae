"""Domain errors become the tool's error result in one place, for sync and async tools alike.

Tools here raise the domain's errors straight from their bodies (and from a worker thread), as
the server's tools do, and are called through a real in-process MCP client.
"""

from __future__ import annotations

import logging

import anyio
import anyio.to_thread
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from _tests.support.results import text_of
from biopb_mcp.errors import DocNotFound, KernelBusy, KernelNotReady
from biopb_mcp.server.tool import READ_ONLY, tool

pytestmark = pytest.mark.anyio


def probe_server() -> MCPServer:
    mcp = MCPServer("probe")

    @tool(mcp, READ_ONLY)
    def sync_missing(doc_id: str) -> str:
        """Raise DocNotFound from a sync body."""
        raise DocNotFound(f"no doc {doc_id!r}; closest: authoring", doc_id=doc_id, suggestions=["authoring"])

    @tool(mcp, READ_ONLY)
    async def async_busy_off_loop() -> str:
        """Raise KernelBusy from a worker thread under an async body."""

        def blocked() -> str:
            raise KernelBusy("job-7 is running (3.2 s)", job_id="job-7", seconds=3.2)

        return await anyio.to_thread.run_sync(blocked)

    @tool(mcp, READ_ONLY)
    def sync_not_ready() -> str:
        """Raise KernelNotReady from a sync body."""
        raise KernelNotReady("the kernel died", state="dead")

    @tool(mcp, READ_ONLY)
    async def async_not_ready() -> str:
        """Raise KernelNotReady from an async body."""
        raise KernelNotReady("no kernel yet", state="not_started")

    @tool(mcp, READ_ONLY)
    async def async_crash() -> str:
        """Raise something that is not a domain error."""
        raise RuntimeError("internal detail /secret/path")

    @tool(mcp, READ_ONLY)
    def fine() -> str:
        """Succeed."""
        return "all good"

    return mcp


async def call(name: str, arguments: dict[str, str] | None = None) -> CallToolResult:
    with anyio.fail_after(20):
        async with Client(probe_server()) as client:
            return await client.call_tool(name, arguments or {})


async def test_a_sync_tool_answers_a_domain_error_with_its_text_under_the_tool_name() -> None:
    result = await call("sync_missing", {"doc_id": "autoring"})
    assert result.is_error
    assert text_of(result) == "Error executing tool sync_missing: no doc 'autoring'; closest: authoring"


async def test_an_async_tool_answers_a_domain_error_from_a_worker_thread_with_the_next_step() -> None:
    result = await call("async_busy_off_loop")
    assert result.is_error
    text = text_of(result)
    assert text.startswith("Error executing tool async_busy_off_loop: Busy: code is already running (3 s). (job-7")
    assert "poll_job('job-7')" in text and "interrupt_kernel" in text


@pytest.mark.parametrize(("name", "state"), [("sync_not_ready", "dead"), ("async_not_ready", "not_started")])
async def test_a_kernel_not_ready_names_its_state_and_start_kernel_in_sync_and_async_tools(
    name: str, state: str
) -> None:
    result = await call(name)
    assert result.is_error
    assert result.structured_content is None
    text = text_of(result)
    assert f"state: {state}" in text and "Call start_kernel" in text and "Error executing tool" not in text


async def test_anything_else_is_a_crash_whose_detail_stays_on_the_server(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR):
        result = await call("async_crash")
    assert result.is_error and "/secret/path" not in text_of(result) and "Traceback" not in text_of(result)
    assert any("/secret/path" in (r.exc_text or "") or r.exc_info for r in caplog.records)


async def test_a_tool_that_succeeds_is_untouched_and_failures_are_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert text_of(await call("fine")) == "all good"
    with caplog.at_level(logging.INFO, logger="biopb_mcp.server.tool"):
        await call("sync_missing", {"doc_id": "x"})
    failed = [r.getMessage() for r in caplog.records if r.name == "biopb_mcp.server.tool"]
    assert failed == ["Tool 'sync_missing' failed: \"no doc 'x'; closest: authoring\""]
