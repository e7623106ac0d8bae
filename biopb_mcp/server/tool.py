"""How a function becomes an MCP tool: its description, its annotations, and domain errors as results.

Every anticipated failure (:class:`~biopb_mcp.errors.BiopbMcpError`) becomes an error result whose
text the agent reads, with the next step in it; anything else is a crash the SDK reports without
detail (and logs).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from biopb_mcp.errors import BiopbMcpError, KernelBusy, KernelNotReady

__all__ = ["READ_ONLY", "call", "call_off_loop", "tool"]

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
"""Annotations of the tools that change nothing."""

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])


def _tool_error(exc: BiopbMcpError) -> ToolError:
    """Translate an anticipated failure into the text the agent sees, with the next step in it."""
    text = str(exc)
    if isinstance(exc, KernelNotReady):
        if exc.state not in text:
            text = f"Kernel not ready (state: {exc.state}). {text}"
        if "start_kernel" not in text:
            text += " Call start_kernel to start it."
    elif isinstance(exc, KernelBusy) and exc.job_id not in text:
        text += f" ({exc.job_id} is running: poll_job('{exc.job_id}') to follow it, interrupt_kernel to stop it.)"
    return ToolError(text)


def call(fn: Callable[..., _T], *args: Any) -> _T:
    """Run a store/kernel call; an anticipated failure becomes a ToolError."""
    try:
        return fn(*args)
    except BiopbMcpError as exc:
        raise _tool_error(exc) from exc


async def call_off_loop(fn: Callable[..., _T], *args: Any) -> _T:
    """Like :func:`call`, on a worker thread, so a blocking call never freezes the event loop."""
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except BiopbMcpError as exc:
        raise _tool_error(exc) from exc


def _not_ready_result(exc: ToolError) -> CallToolResult | None:
    """The structured not-ready answer, when ``exc`` came from a kernel that is not ready."""
    cause = exc.__cause__
    if not isinstance(cause, KernelNotReady):
        return None
    return CallToolResult(
        content=[TextContent(type="text", text=str(exc))],
        structured_content={"kernel_state": cause.state, "next_step": "start_kernel"},
        is_error=True,
    )


def _answer_not_ready(fn: _F) -> _F:
    """Let a kernel tool answer a not-ready kernel with a structured status instead of plain text.

    ``functools.wraps`` keeps the signature the SDK reads for the input schema and Context injection.
    """
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except ToolError as exc:
                result = _not_ready_result(exc)
                if result is None:
                    raise
                return result

        return wrapped_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ToolError as exc:
            result = _not_ready_result(exc)
            if result is None:
                raise
            return result

    return wrapped  # type: ignore[return-value]


def tool(mcp: MCPServer, annotations: ToolAnnotations, description: str | None = None) -> Callable[[_F], _F]:
    """``mcp.tool`` with the docstring dedented into the description the agent reads, text output only."""

    def register(fn: _F) -> _F:
        text = description if description is not None else inspect.cleandoc(fn.__doc__ or "")
        return mcp.tool(description=text, structured_output=False, annotations=annotations)(_answer_not_ready(fn))

    return register
