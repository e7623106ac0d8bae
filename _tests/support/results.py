"""Reading an MCP tool result the way the agent does: its text blocks, joined; and following a job."""

from __future__ import annotations

import re

import anyio
from mcp import Client
from mcp.types import CallToolResult, TextContent

from biopb_mcp.text.kernel import parse_job_line, split_job_line

_STATUS_HEADER = re.compile(r"job-\d+: [^\n]*\n")
"""The line a promoted job's answer opens with (``job-3: finished in 2.1 s.``)."""


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def output_of(result: CallToolResult) -> str:
    """An execute_code or poll_job answer's text without its fixed last line (the job line)."""
    return split_job_line(text_of(result))[0]


async def run_to_end(client: Client, code: str, bound: float = 120.0) -> CallToolResult:
    """execute_code, then poll_job by the job line until the job ended, as a host does.

    Any call can outlive ``kernel.promote_after`` on a loaded machine and come back as a running
    job; a test that wants the code's output follows it instead of hoping the machine is quick.
    """
    with anyio.fail_after(bound):
        result = await client.call_tool("execute_code", {"code": code})
        while (line := parse_job_line(text_of(result))) is not None and line.running:
            await anyio.sleep(0.1)
            result = await client.call_tool("poll_job", {"job_id": line.job_id})
    return result


def job_output(result: CallToolResult) -> str:
    """What the code printed, the same whether the call answered at once or was followed as a job
    (whose poll_job answer opens with its status line)."""
    return printed(text_of(result))


def printed(text: str) -> str:
    """An execute_code or poll_job text without its job line and a followed job's status line."""
    output = split_job_line(text)[0]
    return output[len(found.group(0)):] if (found := _STATUS_HEADER.match(output)) else output
