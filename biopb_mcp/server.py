"""MCP wiring: tools, resources and instructions over the kernel host and the docs store.

This module only adapts. Logic lives in ``biopb_mcp.kernel`` (the kernel), ``biopb_mcp.docs``
(the store, search), ``biopb_mcp.handshake`` (instructions), ``biopb_mcp.subscriptions``
(resources) and the transport helpers (``stdio_guard``, ``http_security``). Every anticipated
failure (:class:`~biopb_mcp.errors.BiopbMcpError`) becomes a :class:`ToolError` whose text the
agent reads; anything else is a crash the SDK reports without detail (and logs here).
"""

from __future__ import annotations

import base64
import functools
import inspect
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal, NoReturn, TypeVar

import anyio
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.context import CallNext, HandlerResult
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel

import biopb_mcp
from biopb_mcp.config import Settings, load_settings, resolve_user_path
from biopb_mcp.docs.store import AUTHORING_GATE, DocStore
from biopb_mcp import doc_messages
from biopb_mcp.errors import BiopbMcpError, ConfigError, DocError, KernelBusy, KernelNotReady
from biopb_mcp.handshake import compose_instructions
from biopb_mcp.kernel import KernelHost, compute
from biopb_mcp.trace import Tracer

logger = logging.getLogger(__name__)

__all__ = ["AppState", "build_server", "serve"]

SERVER_NAME = "biopb-mcp"

WAIT_SLICE_SECONDS = 1.0
"""execute_code waits in slices this long, off the event loop, sending a progress note after each."""

SHUTDOWN_GRACE_SECONDS = 10.0
"""How long the exit path waits for the kernel to shut down before leaving anyway."""

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
"""Annotations of the tools that change nothing."""

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

_ERROR_STATUSES = frozenset({"error", "dead"})
"""Execution statuses shown with ``is_error``: the agent's code raised, or the kernel died under it."""

@dataclass
class AppState:
    """What the tools share: settings, the docs store, the kernel host, the trace, the transport."""

    settings: Settings
    store: DocStore
    kernel: KernelHost
    tracer: Tracer | None = None
    transport: str = "in-process"
    notifier: Any = None
    extra_status: dict[str, Any] = field(default_factory=dict)
    at_exit: list[Callable[[], None]] = field(default_factory=list)
    """Run after the kernel is down, before the process leaves (e.g. remove the HTTP token file)."""


# --------------------------------------------------------------------------- error translation


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
    elif isinstance(exc, DocError):
        text = doc_messages.refusal(exc, doc_messages.FOR_AGENT)
    return ToolError(text)


def _call(fn: Callable[..., _T], *args: Any) -> _T:
    """Run a store/kernel call; an anticipated failure becomes a ToolError."""
    try:
        return fn(*args)
    except BiopbMcpError as exc:
        raise _tool_error(exc) from exc


async def _call_off_loop(fn: Callable[..., _T], *args: Any) -> _T:
    """Like :func:`_call`, on a worker thread, so a blocking call never freezes the event loop."""
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except BiopbMcpError as exc:
        raise _tool_error(exc) from exc


def _rendered_result(rendered: Any, *, prefix: str = "") -> CallToolResult:
    """Text plus PNG images as MCP content; an error in the agent's code marks the result as an error."""
    text = f"{prefix}{rendered.text}" if prefix else rendered.text
    content: list[ContentBlock] = [TextContent(type="text", text=text or "(no output)")]
    for png in rendered.images:
        content.append(ImageContent(type="image", data=base64.b64encode(png).decode("ascii"), mime_type="image/png"))
    return CallToolResult(content=content, is_error=getattr(rendered, "status", "ok") in _ERROR_STATUSES)


# --------------------------------------------------------------------------- middleware


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
        tracer.record(tool, arguments, duration_ms=(Tracer.clock() - started) * 1000, ok=error is None, error=error)
        return result

    return trace_calls


# --------------------------------------------------------------------------- tools


def _versions() -> dict[str, str]:
    found = {"biopb_mcp": biopb_mcp.__version__, "python": sys.version.split()[0]}
    for dist in ("mcp", "jupyter-client", "ipykernel"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "not installed"
    return found


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


def _tool(mcp: MCPServer, annotations: ToolAnnotations, description: str | None = None) -> Callable[[_F], _F]:
    """``mcp.tool`` with the docstring dedented into the description the agent reads, text output only."""

    def register(fn: _F) -> _F:
        text = description if description is not None else inspect.cleandoc(fn.__doc__ or "")
        return mcp.tool(description=text, structured_output=False, annotations=annotations)(_answer_not_ready(fn))

    return register


def _reread_kernel_name(state: AppState) -> None:
    """Take ``kernel.name`` from the config file as it is now, before a (re)start.

    A bad name is fixed by editing the file; without this the next start_kernel would repeat the
    old error until the server itself restarts. Only the name is re-read: the other settings keep
    the values the server started with.
    """
    if not state.settings.config_file.is_file():
        return
    try:
        name = load_settings(state.settings.config_dir).kernel.name
    except ConfigError as exc:
        raise ToolError(f"{exc} (start_kernel re-reads kernel.name from the config file)") from exc
    if name != state.settings.kernel.name:
        logger.info("kernel.name changed in %s: %r -> %r", state.settings.config_file,
                    state.settings.kernel.name, name)
        state.settings = replace(state.settings, kernel=replace(state.settings.kernel, name=name))
        state.kernel.reconfigure(state.settings)


def _register_kernel_tools(mcp: MCPServer, state: AppState) -> None:
    host = state.kernel

    @_tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    def start_kernel() -> str:
        """Start the IPython kernel, or recover it after it died. Call this first in every session,
        and again whenever a tool answers that the kernel is not started, dead or in error.
        Idempotent: a running kernel is left alone. Returns the kernel's status in one or two lines."""
        _reread_kernel_name(state)
        return _call(host.start)

    @_tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True))
    async def execute_code(code: str, ctx: Context) -> CallToolResult:
        """Run Python code in the kernel and return its stdout/stderr, the value of the last
        expression, an error with its traceback, and any PNG figures it displays (as images).
        Use it for all analysis: the namespace persists between calls, so load data once and reuse
        it. This is real code execution as the user, with the user's files; it is not a sandbox.
        A call still running after kernel.promote_after seconds (default 10) becomes a background
        job: you get its id, follow it with poll_job, stop it with interrupt_kernel. Only one
        execution runs at a time; a call while a job runs answers busy with the job id.
        Long output is truncated with a note on how to page through the rest."""
        promote_after = float(state.settings.kernel.promote_after)
        submitted: list[Any] = []  # the execution, known even if the call is cancelled mid-hop

        def wait_slice(seconds: float) -> Any:
            """One worker-thread hop per slice (submit, wait, render): each hop costs ~1 ms."""
            if not submitted:
                submitted.append(host.submit(code))
            return host.render(submitted[0]) if host.wait(submitted[0], seconds) else None

        waited = 0.0
        try:
            while True:
                slice_seconds = min(WAIT_SLICE_SECONDS, max(promote_after - waited, 0.0))
                if slice_seconds <= 0 and submitted:
                    break
                rendered = await _call_off_loop(wait_slice, slice_seconds)
                if rendered is not None:
                    return _rendered_result(rendered)
                waited += slice_seconds
                await ctx.report_progress(waited, None, f"running for {waited:.0f} s")
        except anyio.get_cancelled_exc_class():
            # The client gave up on the call; keep the execution reachable as a job.
            if submitted:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(host.promote, submitted[0])
            raise
        execution = submitted[0]
        job_id = await _call_off_loop(host.promote, execution)
        so_far = await _call_off_loop(host.poll, job_id)
        note = (
            f"Still running after {promote_after:g} s, so it continues in the background as {job_id}; "
            "interrupt_kernel stops it.\n"
        )
        result = _rendered_result(so_far, prefix=note)
        result.is_error = False
        return result

    @_tool(mcp, READ_ONLY)
    def poll_job(job_id: str, offset: int = 0) -> CallToolResult:
        """Check a background job that execute_code promoted (its id looks like job-1): returns its
        status (running, ok, error, interrupted, dead) and its output so far. Use offset to page
        through long output from that character onward, as a truncation note tells you."""
        return _rendered_result(_call(host.poll, job_id, offset))

    @_tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def interrupt_kernel() -> str:
        """Stop the code running in the kernel (like Ctrl-C; raises KeyboardInterrupt in it). Use
        it when a job runs too long or was started by mistake. The namespace is kept."""
        return _call(host.interrupt)

    @_tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def restart_kernel() -> str:
        """Kill and restart the kernel: every variable, import and loaded dataset is lost. Use it only
        when the kernel is wedged and interrupt_kernel did not help, or the user asks; ask the user
        first if the namespace holds unsaved work."""
        _reread_kernel_name(state)
        return _call(host.restart)

    @_tool(mcp, READ_ONLY)
    def inspect_object(path: str) -> str:
        """Describe a name in the kernel namespace without running code: type, bounded repr,
        signature, docstring, and shape/dtype for arrays. Use it to check what a variable holds
        or how to call a function (e.g. "img", "skimage.filters.threshold_otsu")."""
        return _call(host.inspect, path)

    @_tool(mcp, READ_ONLY)
    def server_status() -> str:
        """Report the server's state: versions, transport, kernel state and pid, the running job,
        the kernel connection file (the user can watch and join with `biopb-mcp console`), the
        session notebook recording your execute_code calls, loaded kernel plugins and failures,
        the dask cluster (compute: mode, scheduler address, workers, threads, memory, dashboard,
        tasks in flight), docs tiers and index size, config and log paths. Use it when something
        behaves unexpectedly, or to tell the user where files are."""
        settings = state.settings
        status: dict[str, Any] = {
            "server": {"name": SERVER_NAME, "transport": state.transport, "pid": os.getpid(), **_versions()},
            "kernel": _call(host.status),
        }
        status["compute"] = compute.status_section(
            settings, host.query_when_idle(compute.STATUS_EXPRESSION), status["kernel"]["state"],
            busy=status["kernel"]["current_job"] is not None)
        try:
            status["docs"] = state.store.summary()
        except BiopbMcpError as exc:
            status["docs"] = {"error": str(exc)}
        status["paths"] = {
            "config_file": str(settings.config_file),
            "docs_local_dir": str(settings.docs_local_dir),
            "log_file": str(settings.log_file),
            "kernel_log_file": str(settings.kernel_log_file),
            "plugins_dir": str(settings.plugins_dir),
            "runtime_dir": str(settings.runtime_dir),
            "trace_file": str(state.tracer.path) if state.tracer else None,
        }
        status.update(state.extra_status)
        if settings.warnings:
            status["config_warnings"] = list(settings.warnings)
        return json.dumps(status, indent=2, default=str)


def _register_doc_tools(mcp: MCPServer, state: AppState) -> None:
    store = state.store

    @_tool(mcp, READ_ONLY)
    def read_doc(id: str) -> str:  # noqa: A002 - the agent-facing parameter name
        """Read a doc by id, as the index lists it (e.g. "authoring"). read_doc("index") re-reads the
        doc index; "<id>@diff" shows how a local copy differs from the shipped one; "<id>@history"
        lists its saved versions and "<id>@v<N>" reads one. Read the reference docs and the matching
        procedure before non-trivial work. An unknown id answers with the closest ids."""
        text = _call(store.read_doc, id)
        _note_in_notebook(state, f"**read_doc** `{id}`")
        return text

    @_tool(mcp, READ_ONLY)
    def search_docs(query: str, max_results: int = 5) -> str:
        """Full-text search over the docs the index lists (its entries and its New shipped docs;
        ignored docs and local docs without an index line are not searched, only read by id).
        Use it for a literal you hit — an exception name, a config key, a log line, a function —
        or when no index entry matches the request. Returns doc id, section and a snippet per hit;
        read_doc the hit to see it whole."""
        from biopb_mcp.docs.search import search_docs as run_search

        return _call(lambda: doc_messages.format_hits(run_search(store, query, max_results), query, doc_messages.FOR_AGENT))

    write_description = (
        "Create or edit a doc in the local docs tier (the index too: id \"index\"). body alone creates or "
        "replaces the whole doc; old+new replaces exactly one occurrence of old (refused when it matches "
        "zero or several times). Writing a shipped id makes a local copy. A new doc gets an index line "
        "under '## Unfiled' automatically. Returns the diff. Nothing is ever deleted; earlier versions "
        "stay readable with read_doc(\"<id>@history\").\n"
        "Use it when the user confirms a procedure worked, or asks you to remember or correct "
        "something.\n" + AUTHORING_GATE.strip()
    )

    @_tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False), write_description)
    async def write_doc(
        id: str,  # noqa: A002 - the agent-facing parameter name
        body: str | None = None,
        old: str | None = None,
        new: str | None = None,
    ) -> str:
        result = await _call_off_loop(store.write_doc, id, body, old, new)
        _note_in_notebook(state, f"**write_doc** `{id}`\n\n```diff\n{str(result.text).strip()}\n```")
        if state.notifier is not None:
            await state.notifier.after_write(result)
        return str(result.text)


def _note_in_notebook(state: AppState, text: str) -> None:
    """A markdown cell in the session notebook, when one is being recorded."""
    recorder = state.kernel.recorder
    if recorder is not None:
        recorder.markdown(text)


# --------------------------------------------------------------------------- build and serve


def build_server(settings: Settings, *, trace: Path | None = None) -> tuple[MCPServer, AppState]:
    """Wire an MCPServer over a fresh DocStore and KernelHost (no kernel started, no disk touched).

    Args:
        settings: the loaded settings.
        trace: a trace file; overrides ``settings.trace_file``.
    """
    store = DocStore(settings.docs_local_dir, history_keep=settings.docs.history_keep)
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
    middleware = [_instructions_middleware(store)]
    if state.tracer is not None:
        middleware.insert(0, _trace_middleware(state.tracer))
    mcp: MCPServer = MCPServer(
        SERVER_NAME,
        version=biopb_mcp.__version__,
        instructions="",  # replaced per connection by the middleware
        log_level=_log_level(settings),
        middleware=middleware,
    )
    _register_kernel_tools(mcp, state)
    _register_doc_tools(mcp, state)
    from biopb_mcp.subscriptions import install_resources

    state.notifier = install_resources(mcp, store)
    return mcp, state


def _recorder(settings: Settings) -> Any:
    """The session notebook writer, unless ``[record] enabled = false``."""
    record = settings.record
    if not record.enabled or record.dir is None:
        return None
    from biopb_mcp.record import SessionRecorder

    return SessionRecorder(record.dir, max_output_chars=record.max_output_chars)


def _log_level(settings: Settings) -> Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]:
    level = str(getattr(settings.server, "log_level", "INFO")).upper()
    if level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        return level  # type: ignore[return-value]
    return "INFO"


def _stderr(line: str) -> None:
    """One line for the human who started the server (stderr: never the JSON-RPC wire)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _shutdown_and_exit(state: AppState, code: int) -> NoReturn:
    """Shut the kernel down (bounded), run ``state.at_exit``, flush logs, leave with ``os._exit``.

    ``os._exit`` because interpreter teardown with live loops, reader threads and BLAS threads can
    hang or crash.
    """
    worker = threading.Thread(target=state.kernel.shutdown, name="kernel-shutdown", daemon=True)
    worker.start()
    worker.join(SHUTDOWN_GRACE_SECONDS)
    if worker.is_alive():
        logger.error("Kernel shutdown did not finish within %.0f s; leaving anyway", SHUTDOWN_GRACE_SECONDS)
    for cleanup in state.at_exit:
        try:
            cleanup()
        except OSError:
            logger.exception("Cleanup at exit failed")
    logger.info("biopb-mcp exiting (%d)", code)
    logging.shutdown()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


async def _exit_on_signal(state: AppState) -> None:
    import signal

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("Received signal %d; shutting the kernel down", signum)
            _shutdown_and_exit(state, 0)


async def _serve_stdio(mcp: MCPServer, state: AppState, wire: Any) -> None:
    from biopb_mcp.stdio_guard import wire_streams

    lowlevel = mcp._lowlevel_server  # no public accessor in mcp 2.3
    async with anyio.create_task_group() as tg:
        tg.start_soon(_exit_on_signal, state)
        async with wire_streams(wire) as (read_stream, write_stream):
            # Leave from inside the transport: its teardown may wait on a reader thread forever.
            try:
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
            except Exception:
                logger.exception("The stdio transport failed; shutting the kernel down")
                _shutdown_and_exit(state, 1)
            logger.info("stdin closed; shutting the kernel down")
            _shutdown_and_exit(state, 0)


def _bind_loopback(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def _http_token(settings: Settings, rotate: bool = False) -> tuple[str, Path, tuple[Path, str] | None]:
    """The bearer token, this server's 0600 file holding it, and (path, how) of the stable token.

    With ``http.token = "stable"`` (the default) the token is the one kept in the state dir,
    reused across restarts (``rotate`` renews it); with ``"per-start"`` it is new every start
    and the third item is None. An unwritable dir is a ConfigError.
    Done before the event loop starts, so the failure is one ``error:`` line and exit 2, not a traceback.
    """
    from biopb_mcp.http_security import new_token, stable_token, write_token_file

    if settings.http.token == "stable":
        try:
            token, stable_path, how = stable_token(settings.state_dir, rotate=rotate)
        except OSError as exc:
            raise ConfigError(
                f"cannot keep the HTTP token in {settings.state_dir}: {exc.strerror or exc}; set "
                f"server.state_dir in {settings.config_file} to a writable directory, or "
                f'http.token = "per-start"', key="server.state_dir") from None
        if how == "replaced":
            logger.warning("the stored HTTP token %s was not a private file of this user; made a new one", stable_path)
        stable: tuple[Path, str] | None = (stable_path, how)
    else:
        token, stable = new_token(), None
    try:
        return token, write_token_file(settings.runtime_dir, token), stable
    except OSError as exc:
        raise ConfigError(
            f"cannot write the HTTP token file in {settings.runtime_dir}: {exc.strerror or exc}; set "
            f"server.runtime_dir in {settings.config_file} to a writable directory (or use --no-auth)",
            key="server.runtime_dir",
        ) from None


def _token_lines(token: str, token_file: Path, stable: tuple[Path, str] | None) -> list[str]:
    """What the person who started the server reads about the token; the token on its own line."""
    if stable is not None:
        path, how = stable
        kept = {"reused": "the stable token, reused", "rotated": "a new stable token (rotated)"}.get(how, "a new stable token")
        return [f"Bearer token ({kept}; kept in {path}, mode 0600; renew it with --rotate-token):", token]
    return [f"Bearer token (new at every start; also in {token_file}, mode 0600):", token]


async def _serve_http(
    mcp: MCPServer, state: AppState, sock: socket.socket, token: str | None, token_file: Path | None,
    stable: tuple[Path, str] | None = None,
) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from biopb_mcp.http_security import GuardMiddleware, HttpGuard, allowlists, client_config_lines

    settings = state.settings
    port = sock.getsockname()[1]
    hosts, origins = allowlists(port, settings.http.allowed_hosts, settings.http.allowed_origins)
    app = mcp.streamable_http_app(
        host="127.0.0.1",
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=sorted(hosts), allowed_origins=sorted(origins)
        ),
    )
    guarded = GuardMiddleware(app, HttpGuard(allowed_hosts=hosts, allowed_origins=origins, token=token))
    url = f"http://127.0.0.1:{port}/mcp"
    state.extra_status["http"] = {"url": url, "auth": token is not None, "token_file": str(token_file) if token_file else None}
    _stderr(f"biopb-mcp serving streamable HTTP at {url} (loopback only)")
    if token_file is not None and token is not None:
        for line in _token_lines(token, token_file, stable):
            _stderr(line)
        if stable is not None:
            state.extra_status["http"]["stable_token_file"] = str(stable[0])
    else:
        warning = (
            "WARNING: --no-auth: any local user and any web page that reaches this port can run code as you "
            "through execute_code. Use it only on a single-user machine."
        )
        logger.warning(warning)
        _stderr(warning)
    for line in client_config_lines(url, token):
        _stderr(line)

    if token_file is not None:
        state.at_exit.append(lambda: token_file.unlink(missing_ok=True))

    import signal

    def on_signal(signum: int, _frame: object) -> None:
        logger.info("Received signal %d; shutting the kernel down", signum)
        _shutdown_and_exit(state, 0)

    # uvicorn captures SIGINT/SIGTERM while serving, then restores these handlers and re-raises
    # the signal it caught: so a signal ends in on_signal (kernel down, token removed), never in
    # the default action that would orphan the kernel.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    # No access log: one line per request is a disk-filling channel for anyone who can reach the
    # port; refusals are logged (rate-limited) by the guard.
    config = uvicorn.Config(
        guarded, log_config=None, log_level=_log_level(settings).lower(), timeout_graceful_shutdown=2, lifespan="on",
        access_log=False,
    )
    server = uvicorn.Server(config)
    await server.serve(sockets=[sock])
    logger.info("HTTP server stopped; shutting the kernel down")
    _shutdown_and_exit(state, 0)


def _run_then_exit(state: AppState, main: Callable[..., Any], *args: Any) -> NoReturn:
    """Run a transport; whatever way it ends, the kernel goes down with the server."""
    try:
        anyio.run(main, *args)
    except BaseException:  # top-level: no exit path may leave an orphan kernel
        logger.exception("The server stopped on an unexpected error")
        _shutdown_and_exit(state, 1)
    _shutdown_and_exit(state, 0)


def serve(
    settings: Settings,
    transport: str = "stdio",
    port: int | None = None,
    auth: bool = True,
    trace: Path | None = None,
    rotate_token: bool = False,
) -> int:
    """Run the server until stdin closes or a signal arrives; the kernel is shut down on the way out.

    Args:
        settings: the loaded settings.
        transport: ``"stdio"`` (default) or ``"http"``.
        port: HTTP port (``settings.http.port`` when None; 0 picks a free one).
        auth: HTTP bearer token (default on); False is ``--no-auth``.
        trace: trace file; overrides ``settings.trace_file``.
        rotate_token: HTTP: replace the stable bearer token with a new one before serving.

    Returns:
        An exit code (the stdio and HTTP paths normally leave through ``os._exit``).
    """
    from biopb_mcp.logs import setup_logging
    from biopb_mcp.runtime_files import sweep_stale

    if transport == "stdio":
        from biopb_mcp.stdio_guard import claim_stdio

        setup_logging(settings, stderr=True)  # creates the log file 0600; raises ConfigError if it cannot
        # Before anything else can print: the wire moves to private fds, fd 1 goes to the log.
        wire = claim_stdio(settings.log_file)
        sweep_stale(settings.runtime_dir)  # files a SIGKILLed server could not remove
        mcp, state = build_server(settings, trace=trace)
        state.transport = "stdio"
        logger.info("biopb-mcp %s serving stdio (pid %d)", biopb_mcp.__version__, os.getpid())
        _run_then_exit(state, _serve_stdio, mcp, state, wire)
    if transport == "http":
        setup_logging(settings, stderr=True)
        sweep_stale(settings.runtime_dir)
        mcp, state = build_server(settings, trace=trace)
        state.transport = "http"
        chosen_port = settings.http.port if port is None else port
        use_auth = auth and bool(getattr(settings.http, "auth", True))
        token, token_file, stable = _http_token(settings, rotate_token) if use_auth else (None, None, None)
        try:
            sock = _bind_loopback(chosen_port)
        except OSError as exc:
            if token_file is not None:
                token_file.unlink(missing_ok=True)
            _stderr(f"error: cannot serve HTTP on 127.0.0.1:{chosen_port}: {exc}; pick another with --port")
            return 2
        _run_then_exit(state, _serve_http, mcp, state, sock, token, token_file, stable)
    _stderr(f"error: unknown transport {transport!r}; use stdio or http")
    return 2
