"""How a function becomes an MCP tool: its description, its annotations, and domain errors as results.

Tool bodies call the domain directly and let its anticipated failures
(:class:`~biopb_mcp.errors.BiopbMcpError`) rise; :func:`tool` turns each into the tool's error
result here, once, for sync and async tools alike, with the next step in its text. Anything else
is a crash the SDK reports without detail (and logs), so no server traceback reaches the agent.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from biopb_mcp.errors import BiopbMcpError, KernelNotReady
from biopb_mcp.text.failures import for_agent

logger = logging.getLogger(__name__)

__all__ = ["READ_ONLY", "error_result", "tool"]

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
"""Annotations of the tools that change nothing."""

_F = TypeVar("_F", bound=Callable[..., Any])


def error_result(tool_name: str, exc: BiopbMcpError) -> CallToolResult:
    """The error result a tool answers an anticipated failure with.

    A kernel that is not ready answers with its text alone (it names start_kernel); other failures
    carry the same ``Error executing tool <name>:`` lead the SDK gives its own tool errors.
    """
    text = for_agent(exc)
    logger.info("Tool %r failed: %r", tool_name, text)
    if isinstance(exc, KernelNotReady):
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
    return CallToolResult(
        content=[TextContent(type="text", text=f"Error executing tool {tool_name}: {text}")], is_error=True
    )


def _answering_errors(fn: _F) -> _F:
    """``fn`` answering a domain error with :func:`error_result` instead of raising it.

    Two wrappers because the SDK runs a sync tool on a worker thread and awaits an async one;
    ``functools.wraps`` keeps the signature it reads for the input schema and Context injection.
    """
    name = fn.__name__
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def answering_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except BiopbMcpError as exc:
                return error_result(name, exc)

        return answering_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def answering(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BiopbMcpError as exc:
            return error_result(name, exc)

    return answering  # type: ignore[return-value]


def tool(mcp: MCPServer, annotations: ToolAnnotations, description: str | None = None) -> Callable[[_F], _F]:
    """``mcp.tool`` with the docstring dedented into the description the agent reads, text output only."""

    def register(fn: _F) -> _F:
        text = description if description is not None else inspect.cleandoc(fn.__doc__ or "")
        return mcp.tool(description=text, structured_output=False, annotations=annotations)(_answering_errors(fn))

    return register
