"""The kernel host: one IPython kernel per server, driven through a synchronous, thread-safe API.

Laid out as jupyter_client separates manager and client: ``process.py`` is the process side
(``KernelProcess``: where the kernel runs and who owns it; ``LaunchedKernel`` starts and owns one
in named phases, ``attached.py`` joins one it does not own), ``client.py`` the client side (the
connection, with its parts: ``jobs.py`` executions by id, ``probes.py`` inspection and queries,
``cells.py`` other clients' cells; its sockets are made by jupyter_client in ``sockets.py`` and
read by the one IO thread of ``channels.py``), and ``host.py`` the small facade composing both. Observers
(``events.py``; the session notebook is ``recording.py``) hear what executions do. ``states.py``
holds the kernel states and execution statuses as ``StrEnum``s.

``biopb_mcp.server`` adapts this API into MCP tools; it calls every method from worker threads
(``anyio.to_thread.run_sync``). Every method returns within ``settings.kernel.request_timeout``
(``start``/``restart``: ``startup_timeout``; ``run``: ``promote_after``) and none of them writes to
stdout.

Public API (see the docstrings in ``host.py``, ``jobs.py``, ``probes.py`` and ``executions.py``)::

    host = KernelHost(settings)          # starts nothing (lazy start)
    host.state                           # KernelState: not_started | starting | ready | dead | error | gone
    host.start() -> KernelStart          # idempotent (outcome already_running); recovers dead/error/gone
    host.restart() -> KernelStart        # kill + respawn (outcome restarted: the namespace was lost);
                                         # KernelNotOwned when kernel.existing names a joined kernel
    host.run(code, promote_after, on_tick) -> RunOutcome  # its page, or promoted to a job past promote_after
    host.interrupt() -> Interruption     # as the spec says (SIGINT); waits briefly for the job to stop
    host.status() -> KernelStatus        # state, pid, connection file, job, plugins, paths
    host.shutdown() -> None              # idempotent; kills the kernel's process group
    host.events.subscribe(observer)      # hear what executions do (ExecutionObserver)

    host.jobs.submit(code) -> Execution  # KernelNotReady / KernelBusy(job_id)
    host.jobs.wait(ex, timeout) -> bool  # True once ex finished (all its output collected)
    host.jobs.promote(ex) -> str         # "job-N": keep collecting in the background
    host.jobs.render(ex, offset=0) -> Rendered   # one bounded page + images of an execution, as data
    host.jobs.poll(job_id, offset=0) -> Rendered # same, by id, header set; JobNotFound
    host.probes.inspect(path) -> dict    # type, repr, signature, doc, shape/dtype; KernelBusy
    host.probes.query(expr) -> Any       # a JSON value from an idle kernel; KernelBusy / KernelNotReady
    host.probes.query_when_idle(expr)    # a JSON value from an idle kernel, else None at once

Typical flow of a caller that runs code::

    outcome = host.run(code, settings.kernel.promote_after)   # raises at once when busy / not ready
    outcome.page                         # finished: its page + images; promoted: the job so far
    outcome.promoted                     # still running: poll host.jobs.poll(outcome.page.job_id)

Execution / Rendered status: ``running`` | ``ok`` | ``error`` | ``interrupted`` (KeyboardInterrupt) |
``dead`` (the kernel died under it) | ``aborted`` (restart/shutdown while it ran).
Every execution has an id (``job-N``), promoted or not, so ``poll(job_id, offset)`` pages any output.

``Rendered`` holds facts, not prose: the page (``output``), where it sits (``offset``, ``end``,
``total_chars``, ``next_offset``), the status, whether a status line is due, why it ended
(``note``, ``kernel_lost``, ``ending``); the server words them for the agent. ``Rendered.images`` are PNG bytes, each at most ``kernel.max_image_bytes`` (bigger images are
saved under ``<state_dir>/images/`` and named in the text instead).
"""

from __future__ import annotations

from biopb_mcp.kernel.executions import Execution, Rendered
from biopb_mcp.kernel.host import Interruption, KernelHost, KernelStart, RunOutcome, StartOutcome
from biopb_mcp.kernel.states import Ending, ExecutionStatus, HostEnding, KernelState, KernelStatus

__all__ = [
    "Ending",
    "Execution",
    "ExecutionStatus",
    "HostEnding",
    "Interruption",
    "KernelHost",
    "KernelStart",
    "KernelState",
    "KernelStatus",
    "Rendered",
    "RunOutcome",
    "StartOutcome",
]
