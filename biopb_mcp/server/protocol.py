"""Where the SDK's answers differ from the MCP spec, the spec's answer, as server middleware.

* A ``tools/call`` naming no tool is a JSON-RPC error -32602 (the spec's "unknown tool"); the SDK
  answers it with a tool result flagged ``isError``, which a client cannot tell from a tool that
  ran and failed.
* ``prompts/get`` of an unknown name is -32602 as well (the SDK answers code 0 and logs two
  tracebacks).
* A capability is advertised only when it is served: ``prompts`` only while there are prompts.
* Over HTTP, a batch (a JSON array) is -32600, Invalid Request (:class:`RefuseBatches`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

import anyio.to_thread
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.mcpserver import MCPServer
from mcp.types import INVALID_PARAMS
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RefuseBatches", "spec_middleware"]


def _name(ctx: ServerRequestContext[Any, Any]) -> str | None:
    params = ctx.params if isinstance(ctx.params, dict) else {}
    name = params.get("name")
    return name if isinstance(name, str) else None


def spec_middleware(mcp: MCPServer, *, prompt_names: Callable[[], Collection[str]]) -> Callable[..., Any]:
    """The middleware for ``mcp`` (its tools are all registered); ``prompt_names`` gives the
    prompts served right now (it may read files: it runs on a worker thread)."""
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
            if name is not None and name not in await anyio.to_thread.run_sync(prompt_names):
                raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {name}")
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover") and not await anyio.to_thread.run_sync(prompt_names):
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


BATCH_REPLY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Invalid Request: batch arrays are not supported; send one JSON-RPC message per request",
        },
    }
).encode()


class RefuseBatches:
    """ASGI middleware: a JSON array posted to the endpoint is a batch, answered -32600.

    MCP dropped JSON-RPC batching; the SDK then fails to validate the array and answers -32602
    (invalid params) with pydantic's report, which names the wrong fault. Only the first
    non-blank byte of the body is looked at; everything read is handed on unchanged.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        buffered: list[Message] = []
        first_byte = b""
        while not first_byte:
            message = await receive()
            buffered.append(message)
            first_byte = message.get("body", b"").lstrip()[:1]
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        if first_byte == b"[":
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(BATCH_REPLY)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": BATCH_REPLY})
            return

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)
