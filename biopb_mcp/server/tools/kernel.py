"""The kernel tools: start, execute, poll, interrupt, restart, inspect, status.

Thin: each calls the kernel host (``biopb_mcp.kernel``) and writes what the agent reads.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ToolAnnotations

import biopb_mcp
from biopb_mcp.config.settings import reread_kernel_start_keys
from biopb_mcp.errors import BiopbMcpError, ConfigError
from biopb_mcp.kernel import Rendered, RunOutcome, compute
from biopb_mcp.server import presence
from biopb_mcp.server.result_size import Fitted, encoded_size, fit_images, image_blocks, text_block
from biopb_mcp.server.state import SERVER_NAME, AppState
from biopb_mcp.server.tool import READ_ONLY, tool
from biopb_mcp.text import config as config_text
from biopb_mcp.text import kernel as kernel_text
from biopb_mcp.text.failures import for_agent

logger = logging.getLogger(__name__)

__all__ = ["register_kernel_tools"]

_NOTE_ROOM = 1024
"""Bytes kept for the note saying what was shrunk to fit a result."""

_ERROR_STATUSES = frozenset({"error", "dead"})
"""Execution statuses shown with ``is_error``: the agent's code raised, or the kernel died under it."""


def _versions() -> dict[str, str]:
    found = {"biopb_mcp": biopb_mcp.__version__, "python": sys.version.split()[0]}
    for dist in ("mcp", "jupyter-client", "ipykernel"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "not installed"
    return found


def _rendered_result(rendered: Rendered, limit: int, *, prefix: str = "") -> CallToolResult:
    """Text plus PNG images as MCP content, the whole under ``limit`` bytes as sent.

    The text ends with the job line a client follows a job by (after any note on images shrunk
    to fit); an error in the agent's code marks the result as an error.
    """
    is_error = rendered.status in _ERROR_STATUSES

    def composed(page: Rendered) -> tuple[str, CallToolResult]:
        body = f"{prefix}{kernel_text.rendered_text(page)}"
        return body, CallToolResult(content=[text_block(f"{body}\n{kernel_text.job_line(page)}")], is_error=is_error)

    text, result = composed(rendered)
    text_bytes = encoded_size(result)
    if text_bytes + _NOTE_ROOM > limit:
        # Only with a huge max_output_chars: a shorter page, so its truncation note and the job
        # line say where the rest starts; measured as sent (JSON escapes can grow a char to 6 bytes).
        rendered = _page_that_fits(rendered, lambda page: encoded_size(composed(page)[1]) + _NOTE_ROOM <= limit)
        text, result = composed(rendered)
        text += "\n" + kernel_text.cut_note(limit)
        text_bytes = encoded_size(result)
        fitted = Fitted([], dropped=list(range(1, len(rendered.images) + 1)))
    else:
        fitted = fit_images(text_bytes + _NOTE_ROOM, rendered.images, limit)
    if fitted.shrunk or fitted.dropped:
        text += "\n" + kernel_text.fitted_note(fitted.shrunk, fitted.dropped, len(rendered.images), limit)
    result.content = [text_block(f"{text}\n{kernel_text.job_line(rendered)}"), *image_blocks(fitted.images)]
    return result


def _page_that_fits(rendered: Rendered, fits: Callable[[Rendered], bool]) -> Rendered:
    """The longest head of ``rendered``'s page that ``fits``, as a page of its own (it ends
    where the next one starts; its images are left to their files)."""

    def head(n: int) -> Rendered:
        end = rendered.offset + n
        return dataclasses.replace(rendered, output=rendered.output[:n], end=end, next_offset=end, images=[])

    low, high = 0, len(rendered.output)
    while low < high:
        mid = (low + high + 1) // 2
        if fits(head(mid)):
            low = mid
        else:
            high = mid - 1
    return head(low)


def _reread_kernel_name(state: AppState) -> None:
    """Take ``kernel.name`` and ``[compute]`` from the config file as it is now, before a (re)start.

    A bad name is fixed by editing the file, and a cluster is configured there; without this the
    next start would keep the old values until the server itself restarts. A bad file is refused
    and the settings stay as they were.
    """
    try:
        settings, changed = reread_kernel_start_keys(state.settings)
    except ConfigError as exc:
        raise ConfigError(kernel_text.reread_refused(exc), key=exc.key) from exc
    if changed:
        logger.info("%s changed in %s; the kernel start applies them", ", ".join(changed), state.settings.config_file)
        state.reconfigure(settings)


def register_kernel_tools(mcp: MCPServer, state: AppState) -> None:
    host = state.kernel
    host.events.subscribe(presence.PresenceNotes(state))

    def cancelled_prefix() -> str:
        """The note naming the jobs cancelled calls became, once, on the next answer."""
        jobs = state.take_cancelled()
        if not jobs:
            return ""
        facts = []
        for job_id in jobs:
            try:
                facts.append((job_id, str(host.jobs.poll(job_id, 0).status)))
            except BiopbMcpError:  # forgotten since (a restart): nothing left to point at
                continue
        return kernel_text.cancelled_note(facts) + "\n" if facts else ""

    @tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    def start_kernel() -> str:
        """Start the IPython kernel, or recover it after it died. Call this first in every session,
        and again whenever a tool answers that the kernel is not started, dead or in error.
        Idempotent: a running kernel is left alone. Returns the kernel's status in one or two lines."""
        _reread_kernel_name(state)
        text = kernel_text.started(host.start())
        presence.announce(state)
        return text

    @tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True))
    async def execute_code(code: str, ctx: Context) -> CallToolResult:
        """Run Python code in the kernel and return its stdout/stderr, the value of the last
        expression, an error with its traceback, and any PNG figures it displays (as images).
        Use it for all analysis: the namespace persists between calls, so load data once and reuse
        it. This is real code execution as the user, with the user's files; it is not a sandbox.
        A call still running after kernel.promote_after seconds (default 10) becomes a background
        job: you get its id, follow it with poll_job, stop it with interrupt_kernel. Only one
        execution runs at a time; a call while a job runs answers busy with the job id.
        Long output shows its start and its end, with a note on how to page through the middle.
        An answer about a job (code that ran or was queued, or busy naming the running one) ends
        with the line "[job-N: STATUS]" or "[job-N: STATUS, next_offset=K]" (K: the poll_job offset
        where more output starts); one about no job (no kernel, paused) has none. If you cancel a call, its code keeps running as a job: the
        next answer names it. If the user paused you from their notebook (%biopb pause), nothing
        runs and the answer says so."""
        promote_after = float(state.settings.kernel.promote_after)
        cancelled = anyio.get_cancelled_exc_class()

        def on_tick(waited: float) -> bool:
            """Worker thread, after each second of waiting: a progress note; False once the
            client gave up on the call (its code then goes on as a job)."""
            try:
                anyio.from_thread.check_cancelled()
                anyio.from_thread.run(ctx.report_progress, waited, None, f"running for {waited:.0f} s")
            except cancelled:
                return False
            return True

        def run() -> RunOutcome | CallToolResult:
            paused = presence.paused_result(state)  # the scientist's pause: nothing is sent
            return paused if paused is not None else host.run(code, promote_after, on_tick)

        outcome = await anyio.to_thread.run_sync(run)
        if isinstance(outcome, CallToolResult):
            return outcome
        try:
            await anyio.lowlevel.checkpoint()  # a cancel that arrived while it ran is raised here
        except cancelled:
            state.note_cancelled(outcome.page.job_id)  # the execution is kept as a job: named next time
            raise
        # No await from here on: the notes taken below go out with this answer, or a cancel
        # above left them for the next one.
        rendered, limit = outcome.page, state.settings.kernel.max_result_bytes
        if outcome.promoted and not rendered.done:
            note = (
                f"Still running after {promote_after:g} s, so it continues in the background as "
                f"{rendered.job_id}; interrupt_kernel stops it.\n"
            )
            result = _rendered_result(rendered, limit, prefix=cancelled_prefix() + note)
            result.is_error = False
            return result
        return _rendered_result(rendered, limit, prefix=cancelled_prefix())

    @tool(mcp, READ_ONLY)
    async def poll_job(job_id: str, offset: int = 0) -> CallToolResult:
        """Check a background job that execute_code promoted (its id looks like job-1): returns its
        status (running, ok, error, interrupted, dead) and its output so far. Use offset to page
        through long output from that character onward, as a truncation note tells you."""
        rendered = await anyio.to_thread.run_sync(host.jobs.poll, job_id, offset)
        await anyio.lowlevel.checkpoint()  # cancelled meanwhile: the notes stay for the next answer
        return _rendered_result(rendered, state.settings.kernel.max_result_bytes, prefix=cancelled_prefix())

    @tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def interrupt_kernel() -> str:
        """Stop your code running in the kernel (like Ctrl-C; raises KeyboardInterrupt in it). Use
        it when a job runs too long or was started by mistake. The namespace is kept. It never
        interrupts a cell the user runs in their console or notebook: your code waiting behind
        one is withdrawn unsent (none of it runs), or, if already queued in the kernel, left to
        run after it, and the answer says which."""
        return cancelled_prefix() + kernel_text.interrupted(host.interrupt())

    @tool(mcp, ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def restart_kernel() -> str:
        """Kill and restart the kernel: every variable, import and loaded dataset is lost. Use it only
        when the kernel is wedged and interrupt_kernel did not help, or the user asks; ask the user
        first if the namespace holds unsaved work. Refused when this server joined the user's own
        kernel (server_status: kernel.mode "attached"): that kernel belongs to its frontend."""
        _reread_kernel_name(state)
        text = kernel_text.started(host.restart())
        presence.announce(state)
        return text

    @tool(mcp, READ_ONLY)
    def inspect_object(path: str) -> str:
        """Describe a name in the kernel namespace without running code: type, bounded repr,
        signature, docstring, and shape/dtype for arrays. Use it to check what a variable holds
        or how to call a function (e.g. "img", "skimage.filters.threshold_otsu")."""
        return kernel_text.inspection_text(host.probes.inspect(path))

    @tool(mcp, READ_ONLY)
    def server_status() -> str:
        """Report the server's state: versions, transport, kernel state and pid, whether the kernel
        is this server's or the user's own that it joined (kernel.mode, kernel.owner), the running job,
        the kernel connection file (the user can watch and join with `biopb-mcp console`), the
        session notebook recording your execute_code calls, loaded kernel plugins and failures,
        the dask cluster (compute: mode, scheduler address, workers, threads, memory, dashboard,
        tasks in flight), docs tiers and index size, config and log paths. Use it when something
        behaves unexpectedly, or to tell the user where files are."""
        settings = state.settings
        status: dict[str, Any] = {
            "server": {"name": SERVER_NAME, "transport": state.transport, "pid": os.getpid(), **_versions()},
            "kernel": kernel_text.status_json(host.status()),
        }
        status["compute"] = kernel_text.compute_status(
            compute.status_section(
                settings,
                host.probes.query_when_idle(compute.STATUS_EXPRESSION),
                status["kernel"]["state"],
                busy=status["kernel"]["current_job"] is not None,
            )
        )
        try:
            docs = state.store.summary()
            problem = docs["index_problem"]
            if isinstance(problem, BiopbMcpError):  # the local index cannot be read: said as read_doc says it
                docs["index_problem"] = for_agent(problem)
            status["docs"] = docs
        except BiopbMcpError as exc:
            status["docs"] = {"error": for_agent(exc)}
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
            status["config_warnings"] = [config_text.config_warning(w) for w in settings.warnings]
        return json.dumps(status, indent=2, default=str)
