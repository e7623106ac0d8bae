"""``%load_ext biopb_mcp``: offer this kernel to an agent, and the ``%biopb`` magics.

Loaded in a notebook or console kernel, the extension prints, for this very kernel, the command
that attaches an agent's MCP server to it and the client config lines that launch that command.
The ``%biopb`` magics then show whether an agent is attached and what it ran, replay its recent
cells (with their outputs) in this frontend, and pause or resume it. In a notebook served with
real-time collaboration the agent's cells also appear in the notebook itself as they run
(:mod:`biopb_mcp.ipython.live`); ``%biopb live off|on`` stops and restarts that. The server and the magics
meet through the files of :mod:`biopb_mcp.kernel.link`, in the runtime dir of the biopb config
both read.

The text is built by small functions that return strings; only :func:`load` and the magic write
to the frontend.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from biopb_mcp.ipython.live import LiveCells, LiveState

from biopb_mcp.ipython.jupyter_room import NotLive
from biopb_mcp.kernel.link import AGENT_REQUEST_KEY, AgentPresence, KernelLink, Pause, link_id
from biopb_mcp.kernel.notebook import image_label

__all__ = ["attach_text", "live_text", "load", "server_command", "status_text", "unload"]

DEFAULT_LOG_CELLS = 3
"""Cells ``%biopb log`` replays without a count."""

USAGE = (
    "%biopb status          is an agent attached, what it last ran, is it paused\n"
    "%biopb log [N]         the agent's last N cells (default 3) with their outputs\n"
    "%biopb pause [reason]  the agent's next code is refused (it is told you paused it)\n"
    "%biopb resume          let the agent run code again\n"
    "%biopb live [on|off]   show the agent's cells in this notebook as they run, or stop\n"
)


# --------------------------------------------------------------------------- text (pure)


def server_command() -> list[str]:
    """The absolute command that runs this installation's server.

    Absolute, because an MCP client launches it with its own PATH: the script beside this
    kernel's Python, else the one on PATH, else ``python -m biopb_mcp``.
    """
    beside = Path(sys.executable).parent / "biopb-mcp"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("biopb-mcp")
    return [found] if found else [sys.executable, "-m", "biopb_mcp"]


def attach_text(connection_file: Path, command: list[str], config_dir: str | None = None) -> str:
    """What ``%load_ext biopb_mcp`` prints: the attach command and the client config lines.

    ``config_dir`` (the kernel's ``BIOPB_CONFIG_DIR``, when set) is passed on to the server, so
    it reads the config this kernel's magics read and the two find each other's files.
    """
    from biopb_mcp.config.settings import CONFIG_DIR_ENV  # here: %load_ext stays light

    argv = [*command, "--existing", str(connection_file)]
    env = {CONFIG_DIR_ENV: config_dir} if config_dir else {}
    shell = shlex.join(argv)
    if env:
        shell = f"{CONFIG_DIR_ENV}={shlex.quote(config_dir or '')} {shell}"
    claude = ["claude", "mcp", "add", "biopb"]
    for name, value in env.items():
        claude += ["-e", f"{name}={value}"]
    claude += ["--", *argv]
    entry: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
    if env:
        entry["env"] = env
    return "\n".join(
        [
            f"biopb-mcp: an agent can work in this kernel, beside you (connection file {connection_file}).",
            "It joins this kernel without owning it: it sees your variables and you see its, it cannot",
            "restart or shut the kernel down, and only its own cells' outputs go back to it.",
            "Run the agent's MCP server attached to this kernel:",
            f"  {shell}",
            "Claude Code:",
            f"  {shlex.join(claude)}",
            "Other MCP clients (JSON mcpServers):",
            "  " + json.dumps({"mcpServers": {"biopb": entry}}),
            "Then: " + " | ".join(line.split("  ")[0].strip() for line in USAGE.splitlines()),
            "",
        ]
    )


def _clock(stamp: float | None) -> str:
    if stamp is None:
        return "?"
    when = _dt.datetime.fromtimestamp(stamp)
    today = _dt.datetime.now().date()
    return when.strftime("%H:%M:%S" if when.date() == today else "%Y-%m-%d %H:%M:%S")


def _one_line(code: str, limit: int = 80) -> str:
    lines = [line for line in code.strip().splitlines() if line.strip()]
    if not lines:
        return "(empty)"
    first = lines[0] if len(lines[0]) <= limit else lines[0][: limit - 1] + "…"
    return first + (f"  (+{len(lines) - 1} lines)" if len(lines) > 1 else "")


def live_text(state: LiveState | None, problem: str | None) -> str:
    """The live-cells line of ``%biopb status`` and ``%biopb live``."""
    if state is None:
        return f"Live cells: not shown in this notebook: {problem or 'the extension is not loaded'}\n"
    if not state.enabled:
        return f"Live cells: off (%biopb live on shows the agent's cells in {state.path} again).\n"
    if state.joined:
        return (
            f"Live cells: on: the agent's cells appear in {state.path} as it runs them "
            f"({state.cells} so far; %biopb live off stops it).\n"
        )
    why = f" ({state.problem}; retrying)" if state.problem else ""
    return f"Live cells: on, joining the collaborative room of {state.path}{why}.\n"


def status_text(presence: AgentPresence | None, pause: Pause | None, live: str = "") -> str:
    """What ``%biopb status`` prints (``live``: the :func:`live_text` line, if any)."""
    if presence is None:
        agent = "No agent has attached to this kernel yet (%load_ext biopb_mcp printed the command)."
    elif not presence.alive:
        agent = (
            f"No agent attached now: the last one (biopb-mcp pid {presence.server_pid}) has exited. "
            "Start the MCP client again to re-attach."
        )
    else:
        owner = "it owns this kernel" if presence.owns_kernel else "the kernel stays yours"
        agent = (
            f"Agent attached: biopb-mcp pid {presence.server_pid} over {presence.transport}, "
            f"since {_clock(presence.since)} ({owner})."
        )
    lines = [agent]
    if presence is not None and presence.last_job:
        lines.append(
            f"Last submitted: {presence.last_job} at {_clock(presence.last_submitted)}: "
            f"{_one_line(presence.last_code or '')}"
        )
    if presence is not None:
        if presence.session_notebook:
            lines.append(f"Session notebook: {presence.session_notebook} (%biopb log replays its cells).")
        else:
            lines.append("The server records no session notebook ([record] enabled = false).")
    if pause is None:
        lines.append("Not paused (%biopb pause stops the agent's code from running here).")
    else:
        why = f": {pause.reason}" if pause.reason else ""
        lines.append(f"Paused by you since {_clock(pause.since)}{why} (%biopb resume lets it run again).")
    return "\n".join(lines) + "\n" + live


def pause_text(pause: Pause) -> str:
    """What ``%biopb pause`` prints."""
    return (
        "Paused: from now on the agent's execute_code runs nothing in this kernel and tells the "
        "agent you paused it. Code it already started keeps running (interrupt the kernel to "
        "stop it). %biopb resume lets it run again.\n"
    )


def agent_cells_of(presence: AgentPresence | None, count: int) -> tuple[list[Any], str | None]:
    """The agent's last ``count`` cells from its session notebook, or ``([], why not)``."""
    if presence is None:
        return [], "No agent has attached to this kernel yet: there is no log to show.\n"
    if not presence.session_notebook:
        return [], "The agent's server records no session notebook ([record] enabled = false).\n"
    from nbformat import ValidationError

    from biopb_mcp.kernel.notebook import agent_cells, read_session

    try:
        cells = agent_cells(read_session(Path(presence.session_notebook)))
    except FileNotFoundError:
        return [], f"The agent has run nothing yet ({presence.session_notebook} is not written).\n"
    except (OSError, ValueError, ValidationError) as exc:  # a torn or foreign file: say which
        return [], f"Cannot read the session notebook {presence.session_notebook}: {exc}\n"
    if not cells:
        return [], "The agent has run no code in this session yet.\n"
    return cells[-count:], None


def cell_header(cell: Any) -> str:
    """``[agent] In [7]  job-3 · ok · 0.21 s · 23:01:02`` above each replayed cell."""
    meta = cell.get("metadata", {}).get("biopb", {})
    count = cell.get("execution_count")
    parts = [str(meta.get(k)) for k in ("job_id", "status") if meta.get(k)]
    if isinstance(meta.get("seconds"), (int, float)):
        parts.append(f"{meta['seconds']:g} s")
    if meta.get("finished"):
        parts.append(str(meta["finished"]).split("T")[-1][:8])
    return f"[agent] In [{count if count is not None else ' '}]  " + " · ".join(parts)


# --------------------------------------------------------------------------- the kernel side


def _kernel_link(ip: Any) -> tuple[Path | None, KernelLink | None, str | None]:
    """(connection file, link, why not) for the kernel running ``ip``."""
    try:
        from ipykernel.connect import get_connection_file

        conn = Path(get_connection_file()).resolve()
    except (ImportError, RuntimeError, OSError):
        return (
            None,
            None,
            (
                "biopb_mcp: this IPython is not a Jupyter kernel, so no agent can "
                "attach to it. Load the extension in a notebook or `jupyter console` "
                "kernel.\n"
            ),
        )
    try:
        info = json.loads(conn.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # the file was removed; the running kernel still has its key
        kernel = getattr(ip, "kernel", None)
        info = {"key": getattr(getattr(kernel, "session", None), "key", b"")}
    from biopb_mcp.config.settings import load_settings
    from biopb_mcp.errors import ConfigError
    from biopb_mcp.text.failures import for_terminal

    try:
        settings = load_settings()
    except ConfigError as exc:
        return conn, None, f"biopb_mcp: the biopb config cannot be used: {for_terminal(exc)}\n"
    return conn, KernelLink(Path(settings.runtime_dir), link_id(info, conn)), None


def _write(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text)
    stream.flush()


def _replay(ip: Any, cells: list[Any]) -> None:
    """Show each cell as it ran for the agent: code, streams, rich outputs (images too), errors."""
    for cell in cells:
        _write(f"{cell_header(cell)}\n{cell.source.rstrip()}\n")
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "stream":
                _write(out.get("text", ""), err=out.get("name") == "stderr")
            elif kind in ("execute_result", "display_data"):
                # the frontend renders the bundle as it rendered the agent's own output; a text-only
                # frontend (a console) shows the image's size, not the repr of the object behind it
                data = dict(out.get("data", {}))
                label = image_label(data)
                if label is not None:
                    data["text/plain"] = label
                ip.display_pub.publish(data=data, metadata=dict(out.get("metadata", {})))
            elif kind == "error":
                _write("\n".join(out.get("traceback", [])) + "\n", err=True)
        _write("\n")


def biopb_magic(ip: Any, line: str, loaded: _Loaded) -> None:
    """%biopb status | log [N] | pause [reason] | resume | live [on|off] — the agent working in this kernel."""
    words = line.split(None, 1)
    command, rest = (words[0].lower(), words[1] if len(words) > 1 else "") if words else ("status", "")
    if command == "live":
        _write(_live_command(ip, loaded, rest.strip().lower()))
        return
    if command not in ("status", "log", "pause", "resume"):
        _write(f"%biopb: unknown command {command!r}.\n{USAGE}", err=True)
        return
    _conn, link, problem = _kernel_link(ip)
    if link is None:
        _write(problem or "", err=True)
        return
    try:
        if command == "status":
            _write(status_text(link.presence(), link.paused(), _live_status(loaded)))
        elif command == "log":
            count = DEFAULT_LOG_CELLS
            if rest.strip():
                if not rest.strip().isdigit() or int(rest) < 1:
                    _write(f"%biopb log takes a positive number of cells, got {rest.strip()!r}.\n", err=True)
                    return
                count = int(rest)
            cells, why = agent_cells_of(link.presence(), count)
            if why:
                _write(why)
            _replay(ip, cells)
        elif command == "pause":
            _write(pause_text(link.pause(rest)))
        elif link.resume():
            _write("Resumed: the agent can run code in this kernel again.\n")
        else:
            _write("The agent was not paused.\n")
    except OSError as exc:
        _write(
            f"%biopb {command}: cannot use the runtime dir {link.runtime_dir}: {_runtime_dir_problem(exc)}\n", err=True
        )


def _runtime_dir_problem(exc: OSError) -> str:
    """What is wrong with the runtime dir; a subdirectory that is not private comes with the way
    past it, in the words the text layer writes for it."""
    from biopb_mcp.errors import UnsafeRuntimeDir  # here: %load_ext stays light

    if isinstance(exc, UnsafeRuntimeDir):
        from biopb_mcp.text.failures import for_terminal

        return for_terminal(exc)
    return str(exc)


class _Loaded:
    """What ``load`` set up in one shell, for the magic to use and ``unload`` to take down.

    Kept on the shell itself (:data:`_ATTRIBUTE`): IPython hands ``load`` and ``unload`` only the
    shell, and the shell is what this state belongs to.
    """

    def __init__(self) -> None:
        self.hooks: list[Any] = []
        """The cell hooks ``load`` registered (``unload`` removes them)."""
        self.cells: LiveCells | None = None
        """The kernel's live-cells client (one per kernel), or None with ``problem`` saying why."""
        self.problem: str | None = None
        self.hook: Any = None
        """The ``pre_run_cell`` hook that tells ``cells`` which cells are the agent's."""


_ATTRIBUTE = "_biopb_mcp_extension"
"""The shell's attribute holding its :class:`_Loaded`."""


def _loaded(ip: Any) -> _Loaded:
    """The shell's :class:`_Loaded`, made on first use."""
    found = getattr(ip, _ATTRIBUTE, None)
    if not isinstance(found, _Loaded):
        found = _Loaded()
        setattr(ip, _ATTRIBUTE, found)
    return found


# --------------------------------------------------------------------------- live notebook cells


def _live_status(live: _Loaded) -> str:
    return live_text(live.cells.state() if live.cells is not None else None, live.problem)


def _start_live(ip: Any, live: _Loaded) -> None:
    """Join this notebook's room when the kernel is a notebook's under RTC; else note why not."""
    import os

    from jupyter_core.paths import jupyter_runtime_dir

    from biopb_mcp.ipython.jupyter_room import locate_room
    from biopb_mcp.ipython.live import LiveCells, require_client

    _stop_live(ip, live)
    try:
        room = locate_room(os.environ, os.getppid(), Path(jupyter_runtime_dir()))
        require_client()
        from ipykernel.connect import get_connection_file

        info = json.loads(Path(get_connection_file()).read_text(encoding="utf-8"))
        if not isinstance(info, dict):
            raise ValueError("the connection file holds no JSON object")
    except NotLive as exc:
        live.problem = str(exc)
        return
    except (ImportError, RuntimeError, OSError, ValueError) as exc:  # not an ipykernel, or its file is gone
        live.problem = f"this kernel's connection info cannot be read ({exc})."
        return
    cells = LiveCells(room, info)

    def pre_run_cell(run: Any) -> None:
        kernel = getattr(ip, "kernel", None)
        parent: dict[str, Any] = (kernel.get_parent("shell") if kernel is not None else None) or {}
        mark = parent.get("metadata", {}).get(AGENT_REQUEST_KEY)
        if isinstance(mark, dict) and mark.get("agent") is True:
            code = getattr(run, "raw_cell", "") or ""
            cells.agent_cell_started(
                str(parent["header"]["msg_id"]), str(mark.get("job", "")), code, ip.execution_count
            )

    ip.events.register("pre_run_cell", pre_run_cell)
    cells.start()
    live.cells, live.problem, live.hook = cells, None, pre_run_cell


def _stop_live(ip: Any, live: _Loaded) -> None:
    if live.hook is not None:
        with contextlib.suppress(ValueError):
            ip.events.unregister("pre_run_cell", live.hook)
    if live.cells is not None:
        live.cells.stop()
    live.cells, live.problem, live.hook = None, None, None


def _live_command(ip: Any, live: _Loaded, word: str) -> str:
    """``%biopb live [on|off]``."""
    if word not in ("", "on", "off"):
        return f"%biopb live takes on or off, got {word!r}.\n"
    if word == "on" and live.cells is None:
        _start_live(ip, live)  # RTC may have been installed since the extension was loaded
    elif word and live.cells is not None:
        live.cells.set_enabled(word == "on")
    return _live_status(live)


def load(ip: Any) -> None:
    """Register ``%biopb``, print how to attach an agent to this kernel, and go live when it can."""

    loaded = _loaded(ip)

    def biopb(line: str) -> None:
        biopb_magic(ip, line, loaded)

    biopb.__doc__ = biopb_magic.__doc__
    ip.register_magic_function(biopb, "line", "biopb")
    conn, link, problem = _kernel_link(ip)
    if conn is None or problem:
        _write(problem or "", err=True)
        return
    if link is not None:  # after each of the scientist's cells: what the agent withdrew meanwhile
        from biopb_mcp.kernel.inside import agent_notes

        try:
            loaded.hooks.append(agent_notes.install({}, str(link.agent_file())))
        except OSError as exc:
            _write(f"biopb_mcp: cannot use the runtime dir {link.runtime_dir}: {_runtime_dir_problem(exc)}\n", err=True)
    import os

    from biopb_mcp.config.settings import CONFIG_DIR_ENV

    _write(attach_text(conn, server_command(), os.environ.get(CONFIG_DIR_ENV)))
    _start_live(ip, loaded)
    if loaded.cells is not None:
        _write(
            f"Live: the agent's cells will appear in this notebook ({loaded.cells.room.path}) as it runs "
            "them, marked as its own; %biopb live off stops that.\n"
        )


def unload(ip: Any) -> None:
    """Remove ``%biopb`` and leave the notebook's room (``%unload_ext biopb_mcp``)."""
    loaded = _loaded(ip)
    _stop_live(ip, loaded)
    magics = ip.magics_manager.magics.get("line", {})
    magics.pop("biopb", None)
    from biopb_mcp.kernel.inside import agent_notes

    while loaded.hooks:
        hook = loaded.hooks.pop()
        if hook is not None:
            agent_notes.uninstall(hook)
