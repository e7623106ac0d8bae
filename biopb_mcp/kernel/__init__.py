"""The kernel host: one IPython kernel per server, driven through a synchronous, thread-safe API.

Laid out as jupyter_client separates manager and client: ``process.py`` is the process side
(``KernelProcess``: where the kernel runs and who owns it; ``LaunchedKernel`` starts and owns one
in named phases), ``client.py`` the client side (channels, executions, jobs, inspection), and
``host.py`` the small facade composing both. ``states.py`` holds the kernel states and execution
statuses as ``StrEnum``s.

``biopb_mcp.server`` adapts this API into MCP tools; it calls every method from worker threads
(``anyio.to_thread.run_sync``). Every method returns within ``settings.kernel.request_timeout``
(``start``/``restart``: ``startup_timeout``) and none of them writes to stdout.

Public API (see the docstrings in ``host.py`` and ``executions.py`` for details)::

    host = KernelHost(settings)          # starts nothing (lazy start)
    host.state                           # KernelState: not_started | starting | ready | dead | error | gone
    host.start() -> KernelStart          # idempotent (outcome already_running); recovers dead/error/gone
    host.restart() -> KernelStart        # kill + respawn (outcome restarted: the namespace was lost);
                                         # KernelNotOwned when kernel.existing names a joined kernel
    host.interrupt() -> Interruption     # as the spec says (SIGINT); waits briefly for the job to stop
    ex = host.submit(code)               # -> Execution; KernelNotReady / KernelBusy(job_id)
    host.wait(ex, timeout) -> bool       # True once ex finished (all its output collected)
    host.promote(ex) -> str              # "job-N": keep collecting in the background
    host.render(ex, offset=0) -> Rendered   # one bounded page + images of an execution, as data
    host.poll(job_id, offset=0) -> Rendered # same, by id, header set; JobNotFound
    host.inspect(path) -> str            # type, repr, signature, doc, shape/dtype; KernelBusy
    host.query(expr) -> Any              # a JSON value from an idle kernel; KernelBusy / KernelNotReady
    host.query_when_idle(expr) -> Any    # a JSON value from an idle kernel, else None at once
    host.status() -> KernelStatus        # state, pid, connection file, job, plugins, paths
    host.shutdown() -> None              # idempotent; kills the kernel's process group

Typical flow of a caller that runs code::

    ex = host.submit(code)                       # raises at once when busy / not ready
    if host.wait(ex, settings.kernel.promote_after):
        r = host.render(ex)                      # finished: its page + images
    else:
        job_id = host.promote(ex)                # still running: answer with the job id
        r = host.poll(job_id)                    # status running, output so far, next_offset

Execution / Rendered status: ``running`` | ``ok`` | ``error`` | ``interrupted`` (KeyboardInterrupt) |
``dead`` (the kernel died under it) | ``aborted`` (restart/shutdown while it ran).
Every execution has an id (``job-N``), promoted or not, so ``poll(job_id, offset)`` pages any output.

``Rendered`` holds facts, not prose: the page (``output``), where it sits (``offset``, ``end``,
``total_chars``, ``next_offset``), the status, whether a status line is due, why it ended
(``note``, ``kernel_lost``); the server words them for the agent. ``Rendered.images`` are PNG bytes, each at most ``kernel.max_image_bytes`` (bigger images are
saved under ``<state_dir>/images/`` and named in the text instead).
"""

from __future__ import annotations

from biopb_mcp.kernel.executions import Execution, Rendered
from biopb_mcp.kernel.host import Interruption, KernelHost, KernelStart, RunOutcome, StartOutcome
from biopb_mcp.kernel.states import ExecutionStatus, KernelState, KernelStatus

__all__ = [
    "Execution",
    "ExecutionStatus",
    "Interruption",
    "KernelHost",
    "KernelStart",
    "KernelState",
    "KernelStatus",
    "Rendered",
    "RunOutcome",
    "StartOutcome",
]
