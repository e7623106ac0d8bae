"""Reading an MCP tool result the way the agent does: its text blocks, joined."""

from __future__ import annotations

import re

from mcp.types import CallToolResult, TextContent

from biopb_mcp.text.kernel import split_job_line

_STATUS_HEADER = re.compile(r"job-\d+: [^\n]*\n")
"""The line a promoted job's answer opens with (``job-3: finished in 2.1 s.``)."""


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def output_of(result: CallToolResult) -> str:
    """An execute_code or poll_job answer's text without its fixed last line (the job line)."""
    return split_job_line(text_of(result))[0]


def job_output(result: CallToolResult) -> str:
    """What the code printed, the same whether the call answered at once or was followed as a job
    (whose poll_job answer opens with its status line)."""
    return printed(text_of(result))


def printed(text: str) -> str:
    """An execute_code or poll_job text without its job line and a followed job's status line."""
    output = split_job_line(text)[0]
    return output[len(found.group(0)) :] if (found := _STATUS_HEADER.match(output)) else output
