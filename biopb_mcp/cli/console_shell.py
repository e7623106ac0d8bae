"""The shell ``biopb-mcp console`` runs: jupyter-console, showing the agent's work cleanly.

jupyter-console can show other clients' cells (``include_other_output``), but made for a second
human it garbles an agent's steady stream: its prompt number starts at 1 whatever the kernel ran
before, a result of another client prints a spare ``In [n]:`` after it (and its ``Out[n]:``
through prompt_toolkit, which lands out of order with the rest), output that arrives while the
scientist types is written into the line being typed, and an image shows as its object's repr.
This shell takes the prompt number from the kernel on attach, prints the agent's cells through
one stream in order, suspends the prompt while it does (prompt_toolkit's ``run_in_terminal``
erases it and draws it again, typed text included) and shows an image as ``[image 556×413]``.
Everything the scientist runs is shown as jupyter-console shows it.

Runs in the console's own process (``python -m biopb_mcp.cli.console``), never in the server.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from queue import Empty
from typing import Any, ClassVar

from jupyter_client.consoleapp import JupyterConsoleApp
from jupyter_console.app import ZMQTerminalIPythonApp  # type: ignore[import-untyped]
from jupyter_console.ptshell import ZMQTerminalInteractiveShell  # type: ignore[import-untyped]
from jupyter_console.utils import ensure_async, run_sync  # type: ignore[import-untyped]

from biopb_mcp.kernel.lines import LineEditor
from biopb_mcp.kernel.notebook import image_label

__all__ = ["AgentConsoleApp", "AgentConsoleShell"]

COUNT_TIMEOUT = 2.0
"""Seconds to wait for the kernel's execution count on attach: a kernel busy with the agent's job
answers only when the job ends, and the console must not wait that long to show its prompt."""


def _agent_cell(prefix: str, count: object, code: str) -> str:
    """The agent's cell as IPython echoes one, ``In [n]:`` then ``...:`` aligned under it, with
    every line marked: unmarked, its second line reads like the scientist's own code."""
    head = f"In [{count}]: "
    more = " " * (len(head) - len("...: ")) + "...: "
    lines = code.rstrip("\n").split("\n")
    return "".join(f"{prefix}{head if n == 0 else more}{line}\n" for n, line in enumerate(lines))


class AgentConsoleShell(ZMQTerminalInteractiveShell):  # type: ignore[misc]
    """jupyter-console's shell with the agent's cells shown in order and the prompt kept whole."""

    _pending_clearoutput: bool
    """A ``clear_output(wait=True)`` waits for the next output (jupyter-console's own flag)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._drawn: dict[str, LineEditor] = {}
        """Per stream of the agent's cells: a line a progress bar is still redrawing, shown once
        settled (the prompt drawn again between batches would give every redraw a line)."""
        count = self._kernel_execution_count()
        if count is not None:
            self.execution_count = count + 1

    def _kernel_execution_count(self) -> int | None:
        """The count of the kernel's last cell, from a silent request (no cell, no history)."""
        msg_id = self.client.execute("", silent=True, store_history=False)
        deadline = time.monotonic() + COUNT_TIMEOUT
        while (left := deadline - time.monotonic()) > 0:
            try:
                reply = self.client.get_shell_msg(timeout=left)
            except Empty:
                return None
            if reply["parent_header"].get("msg_id") == msg_id:
                count = reply["content"].get("execution_count")
                return count if isinstance(count, int) else None
        return None

    async def handle_external_iopub(self, loop: Any = None) -> None:
        """Show other clients' output while the prompt waits, with the prompt set aside meanwhile."""
        from prompt_toolkit.application import run_in_terminal

        while self.keep_running:
            if await ensure_async(self.client.iopub_channel.socket.poll(0)):
                session = getattr(self, "pt_cli", None)
                if session is not None and session.app.is_running:
                    await run_in_terminal(self.handle_iopub)  # erase the prompt, print, draw it again
                else:
                    self.handle_iopub()
            await asyncio.sleep(0.5)

    def handle_iopub(self, msg_id: str = "") -> None:
        """Every iopub message waiting: this console's own as jupyter-console shows them, the
        agent's (any other client's) marked and written in order through ``sys.stdout``."""
        while run_sync(self.client.iopub_channel.msg_ready)():
            msg = run_sync(self.client.iopub_channel.get_msg)()
            kind, content = msg["header"]["msg_type"], msg["content"]
            mine = self.from_here(msg)
            if kind == "execute_input":  # the next prompt follows whoever ran last
                self.execution_count = int(content["execution_count"]) + 1
            if not mine and not self.include_other_output:
                continue
            if kind != "stream" and not mine:
                self._settle_drawn()
            if kind == "status":
                if mine:  # another client's idle must not end the wait for this one's cell
                    self._execution_state = content["execution_state"]
            elif kind == "execute_input":
                if not mine:
                    sys.stdout.write(
                        "\n"
                        + _agent_cell(self.other_output_prefix, content.get("execution_count"), content.get("code", ""))
                    )
            elif kind == "stream":
                out = sys.stderr if content.get("name") == "stderr" else sys.stdout
                if self._pending_clearoutput:
                    out.write("\r")
                    self._pending_clearoutput = False
                text = str(content.get("text", ""))
                if not mine:  # a progress bar of the agent's: only its last state
                    name = str(content.get("name"))
                    self._settle_drawn(but=name)
                    text = self._drawn.setdefault(name, LineEditor()).feed(text)
                out.write(text)
            elif kind == "clear_output":
                if content.get("wait"):
                    self._pending_clearoutput = True
                else:
                    sys.stdout.write("\r")
            elif kind == "error":
                sys.stderr.write("\n".join(content.get("traceback", [])) + "\n")
            elif kind in ("execute_result", "display_data"):
                (self._show_own if mine else self._show_other)(kind, content)
            sys.stdout.flush()
            sys.stderr.flush()

    def _settle_drawn(self, but: str = "") -> None:
        """Write the last state of the agent's lines still being redrawn (except stream ``but``'s):
        its cell moved on."""
        for name, editor in self._drawn.items():
            if name != but:
                (sys.stderr if name == "stderr" else sys.stdout).write(editor.settle())

    def _show_own(self, kind: str, content: dict[str, Any]) -> None:
        """A result or display of the scientist's own cell, as jupyter-console shows it."""
        data = content.get("data", {})
        handled = self.handle_rich_data(data)
        if kind == "execute_result":
            self.execution_count = int(content["execution_count"])
            if "text/plain" not in data:
                return
            sys.stdout.flush()
            sys.stderr.flush()
            self.print_out_prompt()  # prompt_toolkit prints at once: no prompt is running now
            text = data["text/plain"]
            print("\n" + text if "\n" in text else text)
        elif not handled and "text/plain" in data:
            print(data["text/plain"])

    def _show_other(self, kind: str, content: dict[str, Any]) -> None:
        """A result or display of the agent's cell: marked, an image as its size."""
        data = content.get("data", {})
        text = image_label(data) or data.get("text/plain")
        if not isinstance(text, str):
            return
        prefix = self.other_output_prefix
        if kind == "execute_result":
            head = f"{prefix}Out[{content.get('execution_count')}]: "
            sys.stdout.write(head + ("\n" if "\n" in text else "") + text + "\n")
        else:
            sys.stdout.write(f"{prefix}{text}\n")


class AgentConsoleApp(ZMQTerminalIPythonApp):  # type: ignore[misc]
    """jupyter-console's app with :class:`AgentConsoleShell` as its shell."""

    classes: ClassVar[list[type]] = [AgentConsoleShell, *ZMQTerminalIPythonApp.classes]

    def init_shell(self) -> None:
        JupyterConsoleApp.initialize(self)
        signal.signal(signal.SIGINT, self.handle_sigint)  # relay Ctrl-C to the kernel, as jupyter-console does
        self.shell = AgentConsoleShell.instance(
            parent=self,
            manager=self.kernel_manager,
            client=self.kernel_client,
            confirm_exit=self.confirm_exit,
        )
        self.shell.own_kernel = not self.existing
