"""Reading an MCP tool result the way the agent does: its text blocks, joined."""

from __future__ import annotations

from mcp.types import CallToolResult, TextContent


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))
