"""Reading an MCP tool result the way the agent does: its text blocks, joined."""

from __future__ import annotations

from mcp.types import CallToolResult, TextContent

from biopb_mcp.text.kernel import split_job_line


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def output_of(result: CallToolResult) -> str:
    """An execute_code or poll_job answer's text without its fixed last line (the job line)."""
    return split_job_line(text_of(result))[0]
