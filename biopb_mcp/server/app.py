"""Building the server: the MCPServer, its middleware, its tools and resources over one AppState.

This package only adapts. Logic lives in ``biopb_mcp.kernel`` (the kernel) and ``biopb_mcp.docs``
(the store, search); the modules here turn their data into what the agent reads.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

import biopb_mcp
from biopb_mcp.config.settings import Settings, resolve_user_path
from biopb_mcp.docs.store import DocStore
from biopb_mcp.kernel import KernelHost
from biopb_mcp.server.prompts.completions import install_completions
from biopb_mcp.server.prompts.handlers import install_prompts
from biopb_mcp.server.protocol import spec_middleware
from biopb_mcp.server.resources.handlers import install_resources
from biopb_mcp.server.sdk import check_sdk
from biopb_mcp.server.state import SERVER_NAME, AppState
from biopb_mcp.server.tools.docs import register_doc_tools
from biopb_mcp.server.tools.kernel import register_kernel_tools
from biopb_mcp.server.tools.viewer import register_viewer_tools
from biopb_mcp.server.trace import Tracer
from biopb_mcp.server.unsendable import answers_middleware
from biopb_mcp.text import kernel as kernel_text
from biopb_mcp.text.instructions import compose_instructions

logger = logging.getLogger(__name__)

__all__ = ["build_server", "log_level"]


def _instructions_middleware(store: DocStore) -> Callable[..., Any]:
    """Compose the instructions at each ``initialize`` / ``server/discover`` (both protocol eras carry them)."""

    async def per_connection(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover"):
            instructions = await anyio.to_thread.run_sync(compose_instructions, store)
            if isinstance(result, dict):
                result["instructions"] = instructions
            elif isinstance(result, BaseModel) and hasattr(result, "instructions"):
                result = result.model_copy(update={"instructions": instructions})
        return result

    return per_connection


def _result_error(result: HandlerResult) -> str | None:
    """The error text of a tools/call result, or None when it succeeded."""
    if isinstance(result, BaseModel):
        result = result.model_dump(by_alias=True)
    if not isinstance(result, dict) or not (result.get("isError") or result.get("is_error")):
        return None
    for block in result.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            return str(block.get("text", ""))
    return "error"


def _answer_chars(result: HandlerResult) -> int | None:
    """Characters of text (and of structured content) a tools/call result hands the agent."""
    if isinstance(result, BaseModel):
        result = result.model_dump(by_alias=True)
    if not isinstance(result, dict):
        return None
    total = 0
    for block in result.get("content") or []:
        if isinstance(block, dict):
            total += len(str(block.get("text") or block.get("data") or ""))
    structured = result.get("structuredContent") or result.get("structured_content")
    if structured:
        total += len(json.dumps(structured, ensure_ascii=False))
    return total


def _trace_middleware(tracer: Tracer) -> Callable[..., Any]:
    """Record one trace line per ``tools/call``: tool, argument summary, duration, ok/error."""

    async def trace_calls(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params or {}
        tool = str(params.get("name", "?"))
        arguments = params.get("arguments") if isinstance(params.get("arguments"), dict) else None
        started = Tracer.clock()
        # Records are written inline: one small O_APPEND write, cheaper than a thread hop, and it
        # still lands when the call is being cancelled.
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            elapsed = (Tracer.clock() - started) * 1000
            tracer.record(tool, arguments, duration_ms=elapsed, ok=False, error=type(exc).__name__)
            raise
        error = _result_error(result)
        tracer.record(
            tool,
            arguments,
            duration_ms=(Tracer.clock() - started) * 1000,
            ok=error is None,
            error=error,
            answer_chars=_answer_chars(result),
        )
        return result

    return trace_calls


def build_server(settings: Settings, *, trace: Path | None = None) -> tuple[MCPServer, AppState]:
    """Wire an MCPServer over a fresh DocStore and KernelHost (no kernel started, no disk touched).

    Args:
        settings: the loaded settings.
        trace: a trace file; overrides ``settings.trace_file``.
    """
    store = DocStore(
        settings.docs_local_dir,
        history_keep=settings.docs.history_keep,
        search_db=settings.search_db,
        withhold=settings.docs.withhold,
    )
    trace_path = resolve_user_path(settings, trace) if trace is not None else settings.trace_file
    recorder = _recorder(settings)
    state = AppState(
        settings=settings,
        store=store,
        kernel=KernelHost(settings, recorder=recorder),
        tracer=Tracer(trace_path) if trace_path is not None else None,
    )
    if recorder is not None:
        state.at_exit.append(recorder.close)
    instructions = _instructions_middleware(store)
    # outermost but for the trace: it checks each answer as the transport will get it
    middleware = [answers_middleware(), instructions]
    if state.tracer is not None:
        middleware.insert(0, _trace_middleware(state.tracer))
    mcp: MCPServer = MCPServer(
        SERVER_NAME,
        version=biopb_mcp.__version__,
        instructions="",  # replaced per connection by the middleware
        log_level=log_level(settings),
        middleware=middleware,
    )
    check_sdk(mcp)
    register_kernel_tools(mcp, state)
    register_viewer_tools(mcp, state)
    register_doc_tools(mcp, state)
    notifier = install_resources(mcp, store, max_bytes=settings.kernel.max_result_bytes)
    state.notifier = notifier
    prompts = install_prompts(mcp, store, notifier, settings.kernel.max_result_bytes)
    install_completions(mcp, store, prompts, state.kernel)
    # traced, around the rest: its answer to prompts/get and initialize is the last word
    mcp.middleware.insert(mcp.middleware.index(instructions), spec_middleware(mcp, prompt_names=prompts.names))
    return mcp, state


def _recorder(settings: Settings) -> Any:
    """The session notebook writer, unless ``[record] enabled = false``."""
    record = settings.record
    if not record.enabled or record.dir is None:
        return None
    from biopb_mcp.kernel.notebook import SessionRecorder

    return SessionRecorder(
        record.dir,
        max_output_chars=record.max_output_chars,
        about=kernel_text.notebook_about,
        note_of=kernel_text.execution_note,
    )


def log_level(settings: Settings) -> Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]:
    level = str(getattr(settings.server, "log_level", "INFO")).upper()
    if level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        return level  # type: ignore[return-value]
    return "INFO"
