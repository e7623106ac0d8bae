"""An answer that cannot be encoded fails alone: that request gets an error, the session goes on.

Python text can hold what no UTF-8 message can: a lone surrogate, which is how a file name that
is not valid UTF-8 reaches Python. The SDK encodes each message in its transport's writer task,
and over stdio one failed encode ends that task and with it the session (the kernel's namespace
goes too). Every name from disk is escaped where it is read (:mod:`biopb_mcp.fs.names`); this is
the net under that, in two places:

* :func:`answers_middleware` checks each answer before the SDK hands it to any transport, and
  turns one that cannot be sent into a JSON-RPC error for its request (stdio, HTTP, in-process);
* :class:`GuardedWriteStream` checks each message at the stdio writer itself, for what no
  middleware sees (notifications, errors): a response becomes an error, anything else is dropped
  with a line in the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, Self

from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.message import SessionMessage
from mcp.types import INTERNAL_ERROR, ErrorData, JSONRPCError, JSONRPCResponse
from pydantic_core import PydanticSerializationError

from biopb_mcp.text import wire as wire_text

logger = logging.getLogger(__name__)

__all__ = ["GuardedWriteStream", "answers_middleware", "first_unsendable"]

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def first_unsendable(value: Any, where: str = "") -> tuple[str, str] | None:
    """(where, character) of the first lone surrogate in a wire value (dicts, lists, strings), or None."""
    if isinstance(value, str):
        if value.isascii():
            return None
        found = _SURROGATE.search(value)
        return None if found is None else (where or "result", found.group())
    if isinstance(value, dict):
        for key, item in value.items():
            hit = first_unsendable(key, where) or first_unsendable(item, f"{where}.{key}" if where else str(key))
            if hit is not None:
                return hit
    elif isinstance(value, (list, tuple)):
        for n, item in enumerate(value):
            hit = first_unsendable(item, f"{where}[{n}]")
            if hit is not None:
                return hit
    return None


def answers_middleware() -> Callable[..., Any]:
    """Server middleware: an answer holding text no message can carry becomes a JSON-RPC error."""

    async def sendable(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        hit = first_unsendable(result) if isinstance(result, dict) else None
        if hit is not None:
            where, char = hit
            logger.warning("The answer to %s held %r at %s; answered with an error instead", ctx.method, char, where)
            raise MCPError(code=INTERNAL_ERROR, message=wire_text.unsendable_answer(ctx.method, where, char))
        return result

    return sendable


class GuardedWriteStream:
    """The stdio transport's write stream, sending only messages that encode.

    The check is the encode the SDK's writer does next; a message that fails it never reaches
    the writer task, whose failure would end the session.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        try:
            message.model_dump_json(by_alias=True, exclude_unset=True)
        except (PydanticSerializationError, UnicodeError, ValueError) as exc:
            reason = " ".join(str(exc).split())[:200]
            request_id = getattr(message, "id", None)
            if not isinstance(message, (JSONRPCResponse, JSONRPCError)) or request_id is None:
                logger.warning("A %s could not be encoded and was not sent: %s", type(message).__name__, reason)
                return
            logger.warning(
                "The answer to request %r could not be encoded; sent an error instead: %s", request_id, reason
            )
            error = ErrorData(code=INTERNAL_ERROR, message=wire_text.unencodable_message(reason))
            item = SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error), metadata=item.metadata)
        await self._inner.send(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._inner.__aexit__(*exc_info)
