"""The session notebook as an observer of executions: each kernel start opens a notebook, each
finished execution becomes a cell of it with the outputs the kernel sent.

``SessionRecorder`` (``notebook.py``) writes the file and knows nothing of kernels;
``SessionRecording`` turns execution events into what it writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biopb_mcp.kernel.events import ExecutionObserver
from biopb_mcp.kernel.notebook import KernelSetup, OutputCollector, SessionRecorder

if TYPE_CHECKING:
    from biopb_mcp.config.settings import Settings
    from biopb_mcp.kernel.executions import Execution

__all__ = ["SessionRecording"]


class SessionRecording(ExecutionObserver):
    """Records every execution of one host into ``recorder``'s notebooks.

    Args:
        recorder: the notebook writer.
        settings: returns the settings in force (kernel name, joined kernel, plugins), read at
            each kernel start for the notebook's setup cell.
    """

    def __init__(self, recorder: SessionRecorder, settings: Callable[[], Settings]) -> None:
        self.recorder = recorder
        self._settings = settings
        self._lock = threading.Lock()
        self._collectors: dict[str, OutputCollector] = {}
        """msg_id -> the outputs of an execution not finished yet."""

    def kernel_ready(self, pid: int | None, description: str) -> None:
        """Begin a new session notebook for a freshly started (or joined) kernel."""
        settings = self._settings()
        name = settings.kernel.name or "python3"
        joined = settings.kernel.existing
        about = self.recorder.about(pid, description)
        setup = KernelSetup(cwd=None if joined else os.getcwd(), joined=str(joined) if joined else None)
        if not joined or settings.kernel.existing_plugins:  # the bootstrap ran: the plugins are there
            from biopb_mcp.kernel.env import compute_config, outputs_config

            setup = dataclasses.replace(
                setup,
                plugins=(
                    "show, out_path, save_labels, save_image, save_table, read_table, dask_client, viewer, open_image (built in)",
                    *_plugin_labels(Path(settings.plugins_dir)),
                ),
                load={
                    "plugins_dir": str(settings.plugins_dir),
                    "compute": compute_config(settings),
                    "outputs": outputs_config(settings),
                },
            )
        self.recorder.start_notebook(kernel_name=name, display_name=f"Python ({name})", about=about, setup=setup)

    def submitted(self, ex: Execution) -> None:
        with self._lock:
            self._collectors[ex.msg_id] = self.recorder.collector()

    def output(self, ex: Execution, msg_type: str, content: dict[str, Any]) -> None:
        collector = self._collectors.get(ex.msg_id)  # only the IO thread adds outputs
        if collector is not None:
            collector.add(msg_type, content)

    def finished(self, ex: Execution) -> None:
        """Queue the finished cell for the notebook writer (jobs too, when they end)."""
        with self._lock:
            collector = self._collectors.pop(ex.msg_id, None)
        if collector is None:
            return
        count = ex.reply_content.get("execution_count")
        collector.execution_count = count if isinstance(count, int) else None
        meta = {"job_id": ex.job_id, "status": ex.status, "seconds": round(ex.elapsed(), 3), "promoted": ex.promoted}
        note = self.recorder.note_of(ex.note, ex.ending, ex.kernel_lost)
        if note:
            meta["note"] = note
        self.recorder.code_cell(ex.code, collector, meta)

    def outside_cell(self, code: str) -> None:
        self.recorder.outside_code(code)

    def status(self) -> str | None:
        """The session notebook's path (with why it is not being written, if so); None before one."""
        rec = self.recorder
        if rec.path is None:
            return None
        return f"{rec.path} (not written: {rec.error})" if rec.error else str(rec.path)


def _plugin_labels(plugins_dir: Path) -> list[str]:
    """The plugin files and entry points the kernel bootstrap loads, as a reader should see them."""
    labels: list[str] = []
    with contextlib.suppress(OSError):
        labels += sorted(p.name for p in plugins_dir.glob("*.py") if not p.name.startswith("_"))
    with contextlib.suppress(Exception):  # a broken distribution's metadata must not stop a start
        from importlib.metadata import entry_points

        labels += [f"{ep.name} (entry point)" for ep in entry_points(group="biopb_mcp.namespace")]
    return labels
