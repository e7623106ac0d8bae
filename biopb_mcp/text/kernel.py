"""What the agent reads about the kernel: the prose over the kernel host's data.

The host returns states, outcomes and errors carrying their facts; only here are they turned into
sentences that name the tool to call next.
"""

from __future__ import annotations

import importlib.util
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biopb_mcp.config.settings import CONFIG_DIR_ENV
from biopb_mcp.errors import (
    ConfigError,
    JobNotFound,
    KernelBusy,
    KernelError,
    KernelNotOwned,
    KernelNotReady,
    KernelProblem,
    RestartRefused,
    UnsafeRuntimeDir,
)
from biopb_mcp.kernel import (
    Ending,
    ExecutionStatus,
    HostEnding,
    Interruption,
    KernelStart,
    KernelState,
    KernelStatus,
    Rendered,
    StartOutcome,
)
from biopb_mcp.text.config import config_refusal, unsafe_runtime_dir
from biopb_mcp.text.install import install_command

__all__ = [
    "JOB_LINE",
    "JobLine",
    "cancelled_note",
    "compute_status",
    "console_refusal",
    "cut_note",
    "error_text",
    "execution_note",
    "fitted_note",
    "inspection_text",
    "interrupted",
    "job_line",
    "lost_kernel",
    "not_owned",
    "notebook_about",
    "overflow_note",
    "parse_job_line",
    "rendered_text",
    "reread_refused",
    "restart_refused",
    "split_job_line",
    "started",
    "summary",
]


def lost_kernel(
    state: str,
    cause: str,
    log_tail: str,
    failed: KernelProblem = KernelProblem.OTHER,
    details: Mapping[str, object] | None = None,
) -> str:
    """Why the kernel is ``error``, ``dead`` or ``gone``, from the host's facts: what failed or how
    it went, and its last log lines; "" in any other state or without a cause. A failed start's
    kind (``failed``, with its ``details``) adds the hint it calls for."""
    if not cause:
        return ""
    if state == KernelState.ERROR:
        said = _start_failure(cause, failed, details or {})
        return f"{said}\nLast kernel log lines:\n{log_tail}" if log_tail else said
    if state == KernelState.DEAD:
        return f"The kernel died ({cause}). Last kernel log lines:\n{log_tail}\n"
    if state == KernelState.GONE:
        return f"The joined kernel is gone: {cause}."
    return ""


def _start_failure(cause: str, failed: KernelProblem, details: Mapping[str, object]) -> str:
    """What a start failed on (``cause``, the host's statement), written with its hint where the
    kind has one: a joined kernel busy with its notebook's cell, a runtime dir that is not private."""
    refused = details.get("refused")
    if failed is KernelProblem.RUNTIME_DIR_UNSAFE and isinstance(refused, UnsafeRuntimeDir):
        return f"cannot use the runtime dir {details['runtime_dir']} ({unsafe_runtime_dir(refused)})."
    seconds = details.get("seconds")
    if failed is KernelProblem.NO_ANSWER_AT_START and isinstance(seconds, int | float):
        return f"the kernel did not answer within {seconds:.0f} s (is a cell still running in its notebook?)."
    return cause


def not_ready(exc: KernelNotReady) -> str:
    """Why no kernel can take the call, and that start_kernel is the way on."""
    lost = lost_kernel(exc.state, exc.cause, exc.log_tail, exc.kind, exc.details)
    state, reason = exc.state, lost or str(exc)
    if state == KernelState.NOT_STARTED:
        text = "No kernel is running. Call start_kernel first."
    elif state == KernelState.STARTING:
        text = "The kernel is still starting. Call start_kernel (it waits until ready), then retry."
    elif state == KernelState.DEAD:
        text = f"{reason} Call start_kernel to start a fresh kernel (the namespace was lost)."
    elif state == KernelState.GONE:
        text = (
            f"{reason} Call start_kernel to join it again once its frontend runs it; for another "
            "kernel, restart the server with --existing <its connection file>."
        )
    else:
        advice = ""
        if exc.setting:
            advice += f" {_set_line(exc.setting, exc.config_file, exc.wanted)}."
        if exc.joined:
            advice += (
                " If its frontend shut it down, start it there again; for another kernel, restart "
                "the server with --existing <its connection file>."
            )
        text = f"The kernel could not start: {reason}{advice} Call start_kernel to try again."
    if state not in text:
        text = f"Kernel not ready (state: {state}). {text}"
    return text


def busy(exc: KernelBusy) -> str:
    """Which job holds the kernel, for how long, and how to follow or stop it."""
    job = exc.job_id
    if not job:
        return "inspect_object is running; retry in a moment."
    # ends with the job line, as every answer about a job does: a client follows the running job by it
    return (
        f"Busy: code is already running ({exc.seconds:.0f} s). ({job} is running: poll_job('{job}') to follow "
        f"it, interrupt_kernel to stop it.)\n[{job}: {ExecutionStatus.RUNNING}]"
    )


def job_not_found(exc: JobNotFound) -> str:
    """What a job id looks like, and the ones that exist."""
    hint = f" Recent ids: {', '.join(exc.recent)}." if exc.recent else " No code has run yet."
    if exc.notebook:
        hint += (
            f" {exc.job_id} itself was forgotten to bound memory (kernel.max_kept_bytes); its cell, with "
            f"its output as recorded, is in the session notebook {exc.notebook}."
        )
    return (
        f"No job {exc.job_id!r} (ids have the form job-<N>, as execute_code returns them; only the "
        f"last {exc.kept} executions are kept, within kernel.max_kept_bytes).{hint}"
    )


def not_owned(exc: KernelNotOwned) -> str:
    """Why a joined kernel is not restarted here, and what to do instead."""
    return (
        f"Refused to {exc.action} the kernel: it belongs to its frontend (the user's notebook or "
        "console); this server only joined it. Ask the user to restart it there if it must be, "
        "then call start_kernel to join it again."
    )


def restart_refused(exc: RestartRefused) -> str:
    """Why restart_kernel left the running kernel alone, and how to make the restart possible."""
    advice = ""
    if exc.setting:
        advice = f" {_set_line(exc.setting, exc.config_file, exc.wanted)}, then call restart_kernel again."
    return (
        f"Restart refused: the new kernel could not start: {exc.reason} The running kernel was not "
        f"touched: its namespace is kept and execute_code still runs there.{advice}"
    )


def _set_line(setting: str, config_file: str, wanted: str) -> str:
    """``Set <key> in <file> <what it should be>``, each part only when known."""
    where = f" in {config_file}" if config_file else ""
    return f"Set {setting}{where}{' ' + wanted if wanted else ''}"


def reread_refused(exc: ConfigError) -> str:
    """Why start_kernel or restart_kernel refused a config file it re-read: nothing was (re)started."""
    return (
        f"{config_refusal(exc)} (start_kernel and restart_kernel re-read kernel.name and [compute] from "
        "the config file; nothing was started or restarted: fix the file, then call again)"
    )


def error_text(exc: KernelError) -> str:
    """The agent's text for any kernel failure."""
    if isinstance(exc, KernelNotReady):
        return not_ready(exc)
    if isinstance(exc, KernelNotOwned):
        return not_owned(exc)
    if isinstance(exc, KernelBusy):
        return busy(exc)
    if isinstance(exc, JobNotFound):
        return job_not_found(exc)
    if isinstance(exc, RestartRefused):
        return restart_refused(exc)
    if exc.kind is KernelProblem.INSPECTION_STUCK:
        return "Another inspection did not finish; retry."
    return str(exc)


def console_refusal(exc: KernelError) -> str:
    """Why ``biopb-mcp console`` cannot attach, with the command that would let it."""
    facts = exc.details
    if exc.kind is KernelProblem.CONSOLE_OTHER_CONFIG:
        where = facts["server_config_dir"]
        return (
            f"the biopb-mcp server with pid {facts['pid']} runs with the config dir {where}, not "
            f"{facts['config_dir']}: run biopb-mcp console with {CONFIG_DIR_ENV}={where}"
        )
    if exc.kind is KernelProblem.CONSOLE_NO_SERVER:
        of_config = f" with the config dir {facts['config_dir']}" if facts.get("config_dir") is not None else ""
        return (
            f"no running biopb-mcp server{of_config} with a kernel found in {facts['runtime_dir']}: start your "
            "MCP client (the agent calls start_kernel first), then run biopb-mcp console again"
        )
    if exc.kind is KernelProblem.CONSOLE_NEEDS_EXTRA:
        return f"biopb-mcp console needs jupyter-console: {install_command('console')}"
    return str(exc)


def connect_command(status: KernelStatus) -> str | None:
    """The command that joins the scientist's console to the kernel: ``biopb-mcp console`` for
    this server's own kernel (with the install step first when the ``console`` extra is missing,
    as the bare command would only fail), Jupyter's for a kernel it joined."""
    if not status.connection_file:
        return None
    if not status.owned:
        return f"jupyter console --existing {status.connection_file}"
    command = f"biopb-mcp console --pid {status.server_pid}"
    if importlib.util.find_spec("jupyter_console") is None:
        return f"{install_command('console')} && {command}"
    return command


_INTERRUPT_WORDS = {"interrupt_request": "interrupt_request on the control channel"}


def status_json(status: KernelStatus) -> dict[str, Any]:
    """The ``kernel`` section of server_status: the facts, and the owner and console command in words."""
    return {
        "state": status.state,
        "message": lost_kernel(status.state, status.cause, status.log_tail, status.failed_kind, status.failed_details),
        "mode": "owned" if status.owned else "attached",
        "owner": (
            "this server (it started the kernel and ends it)"
            if status.owned
            else "its frontend (a notebook, console or remote Jupyter); this server only joined it"
        ),
        "interrupt": _INTERRUPT_WORDS.get(status.interrupt or "", status.interrupt),
        "kernel_host": status.kernel_host,
        "pid": status.pid,
        "connection_file": status.connection_file,
        "connect_command": connect_command(status),
        "transport": status.transport,
        "socket_dir": status.socket_dir,
        "kernel_spec": status.kernel_spec,
        "current_job": status.current_job,
        "other_cell": status.other_cell,
        "plugins": {
            "built_in": status.builtin_helpers,
            "loaded": status.plugins_loaded,
            "failed": status.plugins_failed,
        },
        "bootstrap_errors": status.bootstrap_errors,
        "parent_death_watch": status.parent_death_watch,
        "kernel_log": status.kernel_log,
        "runtime_dir": status.runtime_dir,
        "session_notebook": status.session_notebook,
    }


def summary(status: KernelStatus) -> str:
    """The ready kernel in a few sentences: pid, spec, connection file, plugins, notebook."""
    if not status.owned:
        where = f"pid {status.pid}" if status.pid else "pid unknown"
        parts = [
            (
                f"Attached to an existing kernel ({where} on {status.kernel_host or 'an unknown host'}; "
                f"connection file {status.connection_file}). It belongs to its frontend: its variables "
                "are shared with you, restart_kernel is refused, interrupt_kernel stops only your own "
                "running code."
            )
        ]
    else:
        parts = [f"Kernel ready (pid {status.pid}, {status.kernel_spec})."]
        parts.append(f"Connection file: {status.connection_file} (share it: {connect_command(status)}).")
    loaded, failed = status.plugins_loaded, status.plugins_failed
    if status.builtin_helpers:
        parts.append(f"Built-in helpers (inspect_object reads their docstrings): {', '.join(status.builtin_helpers)}.")
    if loaded:
        parts.append(f"Lab plugins loaded: {', '.join(Path(p).name if '/' in p else p for p in loaded)}.")
    if failed:
        names = "; ".join(f"{f['plugin']} ({f['error']})" for f in failed)
        parts.append(f"Plugins that failed and were skipped: {names}; see {status.kernel_log}.")
    if status.bootstrap_errors:
        parts.append(f"Bootstrap problems logged in {status.kernel_log}.")
    if status.session_notebook:
        parts.append(f"Session notebook: {status.session_notebook}.")
    return " ".join(parts)


_START_LEADS = {
    StartOutcome.STARTED: "",
    StartOutcome.ALREADY_RUNNING: "Kernel already running. ",
    StartOutcome.RESTARTED: (
        "Kernel restarted: the namespace was lost (variables, imports and loaded data are "
        "gone; re-run the setup code). "
    ),
    StartOutcome.STARTED_BY_RESTART: "Kernel started (there was no previous kernel). ",
}


def started(start: KernelStart) -> str:
    """What start_kernel or restart_kernel did, then the kernel's summary."""
    return _START_LEADS[start.outcome] + summary(start.status)


def _behind(cell: Any) -> str:
    """``a cell from the console (running for 12 s: time.sleep(30))``."""
    seconds = max(0.0, time.monotonic() - cell.since)
    code = f": {cell.code}" if cell.code else ""
    return f"a cell from the {cell.source} (running for {seconds:.0f} s{code})"


def interrupted(result: Interruption) -> str:
    """Whether the interrupt stopped the job, withdrew it or was refused, and where to look next."""
    job = result.job_id
    behind = result.behind
    if job is None:
        if behind is not None:
            return (
                f"None of your code is running. The kernel is running {_behind(behind)}, which is the "
                "scientist's: interrupt_kernel never interrupts it. Ask the user if it should stop."
            )
        return "No code is running; nothing to interrupt."
    if result.withdrawn:
        where = _behind(behind) if behind is not None else "another client's cell"
        side = behind.source if behind is not None else "console or notebook"
        return (
            f"Withdrew {job}: it was waiting behind {where} and had not been sent, so none of it ran; "
            f"that cell was not touched, and the scientist's {side} says so after it. Run your code "
            "again once their cell has finished (execute_code answers busy or waits while it runs)."
        )
    if result.refused:
        where = _behind(behind) if behind is not None else "another client's cell (from the notebook, most likely)"
        return (
            f"Not interrupted: {job} has not started. It waits in the kernel behind {where}, and an "
            "interrupt now would stop that cell instead of your code, so nothing was sent. Your code "
            f'runs when that cell ends: poll_job("{job}") follows it, and interrupt_kernel stops it once '
            "it runs. Ask the user to stop their cell if it should not finish."
        )
    if result.stopped:
        return f'Interrupted {job}: it ended as {result.status}. poll_job("{job}") shows its output.'
    return (
        f"Sent SIGINT, but {job} is still running after {result.waited:.0f} s (native code may ignore "
        f'it until it returns). Check with poll_job("{job}"), or restart_kernel to kill it '
        "(the namespace is lost)."
    )


JOB_LINE = re.compile(r"^\[(?P<job_id>job-\d+): (?P<status>[a-z]+)(?:, next_offset=(?P<next_offset>\d+))?\]$")
"""The last line of every execute_code and poll_job text about a job: ``[job-3: running, next_offset=1200]``.

Every answer that ran, queued or pages code has it, and so does a busy answer (the running job,
without an offset). An answer about no job has none: no kernel (not started, starting, dead,
error), the scientist's pause (nothing was sent), an unknown or forgotten job id, a busy answer
while an inspection (not a job) holds the kernel.

The facts a client follows a job by (its id, its status, where the next page starts) live in
the text itself, in this fixed form, because several hosts show the model only the structured
content of a result that has one: so no result carries structured content, and a client parses
this line instead. ``next_offset`` is there while the job runs or more output remains to page.
"""


@dataclass(frozen=True)
class JobLine:
    """The facts of :data:`JOB_LINE`, parsed back."""

    job_id: str
    status: str
    next_offset: int | None

    @property
    def running(self) -> bool:
        return self.status == ExecutionStatus.RUNNING


def job_line(r: Rendered) -> str:
    """The fixed last line of an execution's text (see :data:`JOB_LINE`)."""
    more = f", next_offset={r.next_offset}" if r.next_offset is not None else ""
    return f"[{r.job_id}: {r.status}{more}]"


def split_job_line(text: str) -> tuple[str, JobLine | None]:
    """A result's text without its job line, and the job facts (None when it has no job line)."""
    body, _, last = text.rstrip("\n").rpartition("\n")
    match = JOB_LINE.match(last)
    if match is None:
        return text, None
    offset = match.group("next_offset")
    return body, JobLine(match.group("job_id"), match.group("status"), int(offset) if offset is not None else None)


def parse_job_line(text: str) -> JobLine | None:
    """The job facts from a result's text (its last line), or None when it has none."""
    return split_job_line(text)[1]


def _status_header(r: Rendered) -> str:
    secs = f"{r.elapsed:.1f} s"
    if r.status == ExecutionStatus.RUNNING and r.waiting_behind is not None:
        return (
            f"{r.job_id}: waiting behind {_behind(r.waiting_behind)} for {secs}; your code has not "
            "started. interrupt_kernel withdraws it without touching that cell."
        )
    if r.status == ExecutionStatus.RUNNING:
        return f"{r.job_id}: running for {secs}; output so far:"
    if r.status == ExecutionStatus.OK:
        return f"{r.job_id}: finished in {secs}."
    if r.status == ExecutionStatus.ERROR:
        return f"{r.job_id}: finished with an error after {secs}."
    if r.status == ExecutionStatus.INTERRUPTED:
        return f"{r.job_id}: interrupted after {secs}."
    if r.status == ExecutionStatus.DEAD:
        return f"{r.job_id}: the kernel died while this ran ({secs})."
    return f"{r.job_id}: {r.status} after {secs}."


_HOST_ENDINGS = {
    Ending.RESTARTED: "The kernel was restarted while this ran; its namespace is gone.",
    Ending.SHUT_DOWN: "The server shut the kernel down while this ran.",
}
"""The note of an execution the host ended (a lost kernel's is ``lost_kernel``'s)."""


def execution_note(note: str, ending: HostEnding | None, kernel_lost: KernelState | None) -> str:
    """Why an execution ended as it did: its own note, or the host's ending in words (the agent's
    answer and the session notebook's cell read the same)."""
    if ending is None:
        return note
    if ending.why is Ending.KERNEL_LOST and kernel_lost is not None:
        return lost_kernel(kernel_lost, ending.cause, ending.log_tail)
    return _HOST_ENDINGS.get(ending.why, note)


_LOST_ADVICE = {
    KernelState.DEAD: "Call start_kernel to start a fresh kernel (namespace lost).",
    KernelState.GONE: " Call start_kernel to join it again once its frontend runs it.",
}
"""After the death note (which ends with the log tail's newline when the kernel was ours)."""


def ending_note(r: Rendered) -> str:
    """Why a finished execution ended as it did, and, when the kernel was lost, how to get one back."""
    note = execution_note(r.note, r.ending, r.kernel_lost)
    if r.kernel_lost is None:
        return note
    return note + _LOST_ADVICE.get(r.kernel_lost, "")


def cancelled_note(jobs: list[tuple[str, str]]) -> str:
    """Where the code of calls the client cancelled went: each went on as a job."""
    lines = []
    for job_id, status in jobs:
        state = "is still running" if status == ExecutionStatus.RUNNING else f"has ended ({status})"
        lines.append(
            f"[a call of yours was cancelled, but its code went on as {job_id}, which {state}: "
            f'poll_job("{job_id}") shows its output; interrupt_kernel stops it]'
        )
    return "\n".join(lines)


_SIZES_SHOWN = 5
"""New sizes listed in the note on images shrunk to fit: the note itself must stay small."""


def fitted_note(shrunk: list[tuple[int, tuple[int, int] | None]], dropped: list[int], attached: int, limit: int) -> str:
    """Why images of a result are smaller than attached, or missing: the client's size limit."""
    did: list[str] = []
    if shrunk:
        sizes = ", ".join(f"{size[0]}x{size[1]}" if size else "smaller" for _, size in shrunk[:_SIZES_SHOWN])
        more = ", …" if len(shrunk) > _SIZES_SHOWN else ""
        did.append(f"{len(shrunk)} of {attached} attached images downscaled (to {sizes}{more})")
    if dropped:
        did.append(f"{len(dropped)} of {attached} left out")
    return (
        f"[{' and '.join(did)} to keep this result under kernel.max_result_bytes={limit} bytes "
        "(a client drops a bigger result whole); each image's full size is in the file its "
        "placeholder above names]"
    )


def cut_note(limit: int) -> str:
    """Said when even the text of a result was over the client's size limit (the page above is
    shorter than max_output_chars; its truncation note says where to read on)."""
    return (
        f"[this page was shortened to keep the result under kernel.max_result_bytes={limit} bytes; "
        "lower kernel.max_output_chars to get pages that fit]"
    )


def overflow_note(r: Rendered) -> str:
    """Where the output past an execution's memory bound is: its file, or nowhere."""
    span = f"chars {r.total_chars}-{r.total_chars + r.dropped} of the output ({r.dropped} chars)"
    if r.overflow_path is None:
        return (
            f"[{span} were not kept in memory (kernel.max_kept_bytes bounds what an execution keeps) "
            "and could not be saved]"
        )
    lost = f"; the last {r.overflow_lost} of them could not be saved" if r.overflow_lost else ""
    return (
        f"[{span} were not kept in memory (kernel.max_kept_bytes bounds what an execution keeps): "
        f"they are saved in {r.overflow_path}{lost}; read them there (e.g. with execute_code), "
        "poll_job pages only what is kept]"
    )


def rendered_text(r: Rendered) -> str:
    """One page of an execution as the agent reads it: a status line when due, the output, and
    notes on where the rest is (the poll_job offset), what was dropped and why it ended."""
    parts: list[str] = []
    if r.header:
        parts.append(_status_header(r))
    if r.requested_offset > r.total_chars:
        parts.append(f"[offset {r.requested_offset} is past the end: the output has {r.total_chars} chars]")
    if r.offset > 0 and r.output:
        parts.append(f"[showing chars {r.offset}-{r.end} of {r.total_chars}]")
    if r.output:
        parts.append(r.output)
    elif r.total_chars == 0 and r.status != ExecutionStatus.RUNNING:
        parts.append("(no output)")
    if r.tail:
        parts.append(
            f"[output truncated: showing chars {r.offset}-{r.end} and {r.tail_offset}-{r.total_chars} of "
            f"{r.total_chars}; the {r.middle} chars between are not shown: "
            f'poll_job("{r.job_id}", offset={r.end}) pages them.]'
        )
        parts.append(r.tail)
    if r.open_line:
        parts.append(r.open_line)
    if r.truncated and not r.tail:
        parts.append(
            f"[output truncated: showing chars {r.offset}-{r.end} of {r.total_chars}; "
            f'{r.total_chars - r.end} more chars. Read on with poll_job("{r.job_id}", offset={r.end}).]'
        )
    elif r.status == ExecutionStatus.RUNNING:
        parts.append(f'[still running: poll_job("{r.job_id}", offset={r.end}) shows what follows.]')
    if r.dropped:
        parts.append(overflow_note(r))
    if r.status != ExecutionStatus.RUNNING:
        parts.append(ending_note(r))
    return "\n".join(p for p in parts if p)


def compute_status(section: dict[str, Any]) -> dict[str, Any]:
    """server_status's ``compute`` section: the facts, with a ``state`` line true for the mode
    (``dask_client()`` raises with no scheduler configured, so "not started" would mislead) and
    the dashboard link saying what it shows."""
    out = {k: v for k, v in section.items() if k not in ("reported", "dashboard_pages")}
    reported, mode, error = section["reported"], section["mode"], section.get("error")
    if mode == "none":
        out["state"] = (
            'off: no cluster is configured ([compute] scheduler = "none"); dask runs in the '
            "kernel's own threads, and dask_client() raises until the user sets a scheduler in "
            "the config file, which the next restart_kernel (or start_kernel) applies"
        )
    elif reported == "no_kernel":
        out["state"] = "not started (no kernel)"
    elif reported == "busy":
        out["state"] = "unknown while code runs (status does not wait for a busy kernel)"
    elif reported != "live":
        out["state"] = "unknown (the kernel did not report it)"
    elif section.get("started"):
        out["state"] = "running" if section.get("status") == "running" else f"client {section.get('status')}"
    else:
        first = "starts a local cluster in the kernel" if mode == "local" else f"connects to {section['scheduler']}"
        out["state"] = f"not started: the first dask_client() call {first}"
        if error:
            out["state"] += f" (the last attempt failed: {error})"
    link = section.get("dashboard")
    if link and section.get("dashboard_pages") is False:
        out["dashboard"] = (
            f"{link} shows only a note that bokeh is missing (pip install 'bokeh>=3.1.0' in the "
            "kernel's environment, then restart_kernel); its /info/main/workers.html works"
        )
    return out


def notebook_about(pid: int | None, desc: str) -> str:
    """The opening line of a session notebook: what its cells are, and which kernel ran them."""
    return (
        f"Recorded by biopb-mcp: each code cell is one execute_code call of the agent, in order, "
        f"with its outputs; markdown cells note doc reads and writes. Kernel pid {pid}, {desc}."
    )


def inspection_text(info: dict[str, Any]) -> str:
    """Readable lines from the kernel's JSON answer about one object."""
    lines = [f"{info['path']}: {info.get('type', '?')}"]
    if "signature" in info:
        lines.append(f"signature: {info['signature']}")
    lines.extend(f"{label}: {value}" for label, value in info.get("facts", []))
    for key in ("len", "file"):
        if key in info:
            lines.append(f"{key}: {info[key]}")
    if "repr" in info:
        lines.append(f"repr: {info['repr']}")
    if info.get("items"):
        lines.append("items:\n" + "\n".join(f"  {line}" for line in info["items"]))
    if "attributes" in info:
        lines.append(f"public attributes: {info['attributes']}")
    if "doc" in info:
        lines.append("doc:\n" + str(info["doc"]))
    elif "class_doc" in info:
        more = f" (more: inspect_object('{info['type']}') on the class)" if info.get("class_doc_cut") else ""
        lines.append(f"class doc: {info['class_doc']}{more}")
    return "\n".join(lines)
