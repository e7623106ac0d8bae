"""Where the SDK's answers differ from the MCP spec, the spec's answer, as server middleware.

* A ``tools/call`` naming no tool is a JSON-RPC error -32602 (the spec's "unknown tool"); the SDK
  answers it with a tool result flagged ``isError``, which a client cannot tell from a tool that
  ran and failed.
* ``prompts/get`` of an unknown name is -32602 as well (the SDK answers code 0 and logs two
  tracebacks).
* A capability is advertised only when it is served: ``prompts`` only while there are prompts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.mcpserver import MCPServer
from mcp.types import INVALID_PARAMS
from pydantic import BaseModel

__all__ = ["spec_middleware"]


def _name(ctx: ServerRequestContext[Any, Any]) -> str | None:
    params = ctx.params if isinstance(ctx.params, dict) else {}
    name = params.get("name")
    return name if isinstance(name, str) else None


def spec_middleware(mcp: MCPServer, *, prompt_names: Callable[[], Collection[str]]) -> Callable[..., Any]:
    """The middleware for ``mcp`` (its tools are all registered); ``prompt_names`` gives the
    prompts served right now."""
    tools: set[str] = set()

    async def to_the_letter(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            if not tools:  # the tool set is fixed once the server runs
                tools.update(tool.name for tool in await mcp.list_tools())
            name = _name(ctx)
            if name is not None and name not in tools:
                raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name}")
        elif ctx.method == "prompts/get":
            name = _name(ctx)
            if name is not None and name not in prompt_names():
                raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {name}")
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover") and not prompt_names():
            _drop_prompts(result)
        return result

    return to_the_letter


def _drop_prompts(result: HandlerResult) -> None:
    """Take the ``prompts`` capability out of an initialize or discover result, in place."""
    if isinstance(result, dict):
        capabilities = result.get("capabilities")
        if isinstance(capabilities, dict):
            capabilities.pop("prompts", None)
    elif isinstance(result, BaseModel):
        capabilities = getattr(result, "capabilities", None)
        if capabilities is not None and getattr(capabilities, "prompts", None) is not None:
            capabilities.prompts = None
