"""The kernel host: one IPython kernel per server, driven through a synchronous, thread-safe API.

``biopb_mcp.server`` adapts this API into MCP tools; it calls every method from worker threads
(``anyio.to_thread.run_sync``). Every method returns within ``settings.kernel.request_timeout``
(``start``/``restart``: ``startup_timeout``) and none of them writes to stdout.

Public API (see the docstrings in ``host.py`` and ``executions.py`` for details)::

    host = KernelHost(settings)          # starts nothing (lazy start)
    host.state                           # "not_started" | "starting" | "ready" | "dead" | "error"
    host.start() -> str                  # idempotent; also the recovery path from dead/error
    host.restart() -> str                # kill + respawn; the text says the namespace was lost
    host.interrupt() -> str              # SIGINT to the kernel; waits briefly for the job to stop
    ex = host.submit(code)               # -> Execution; KernelNotReady / KernelBusy(job_id)
    host.wait(ex, timeout) -> bool       # True once ex finished (all its output collected)
    host.promote(ex) -> str              # "job-N": keep collecting in the background
    host.render(ex, offset=0) -> Rendered   # bounded text + images of one execution
    host.poll(job_id, offset=0) -> Rendered # same, by id, with a status header; JobNotFound
    host.inspect(path) -> str            # type, repr, signature, doc, shape/dtype; KernelBusy
    host.status() -> dict                # state, pid, connection file, job, plugins, paths
    host.shutdown() -> None              # idempotent; kills the kernel's process group

Typical execute_code flow in the server::

    ex = host.submit(code)                       # raises at once when busy / not ready
    if host.wait(ex, settings.kernel.promote_after):
        r = host.render(ex)                      # finished: text + images
    else:
        job_id = host.promote(ex)                # still running: answer with the job id
        r = host.poll(job_id)                    # "job-N: running ... output so far"

Execution / Rendered status: ``running`` | ``ok`` | ``error`` | ``interrupted`` (KeyboardInterrupt) |
``dead`` (the kernel died under it) | ``aborted`` (restart/shutdown while it ran).
Every execution has an id (``job-N``), promoted or not, so ``poll(job_id, offset)`` pages any output.

``Rendered.text`` is always ready to show the agent (truncation and paging notes included);
``Rendered.images`` are PNG bytes, each at most ``kernel.max_image_bytes`` (bigger images are
saved under ``<state_dir>/images/`` and named in the text instead).
"""

from __future__ import annotations

from biopb_mcp.kernel.executions import Execution, Rendered
from biopb_mcp.kernel.host import KernelHost

__all__ = ["Execution", "KernelHost", "Rendered"]
