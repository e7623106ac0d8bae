"""Probes: questions to the kernel outside the agent's cells (start-up checks, inspection, the
idle-time queries of status readers).

Each is a silent ``execute_request`` whose answer comes back as a ``user_expressions`` value, so
nothing enters the user's history or namespace; one at a time, and never behind running code (a
probe would wait for it): a busy kernel answers at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from biopb_mcp.errors import KernelError, KernelProblem, StartFailed
from biopb_mcp.kernel import inspection, rendering
from biopb_mcp.kernel.connection import ClientConnection
from biopb_mcp.kernel.jobs import NUDGE_AFTER, Jobs, busy

__all__ = ["READY_POLL_SECONDS", "Probes"]

READY_POLL_SECONDS = 0.2
"""One kernel_info attempt while waiting for a starting kernel (see ``wait_ready``)."""

_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

_BOOTSTRAP_EXPR = "__import__('json').dumps(__biopb_bootstrap__)"


class Probes:
    """Silent requests to the connected kernel; thread-safe.

    The start-up ones (``wait_ready``, ``evaluate``, ``fetch_bootstrap``, ``run_silent``) are the
    host's, before code is accepted; ``inspect``, ``query`` and ``query_when_idle`` are for tools.
    """

    def __init__(self, conn: ClientConnection, jobs: Jobs) -> None:
        self._conn = conn
        self._jobs = jobs

    # -- start-up (host) ---------------------------------------------------------------------------
    def wait_ready(self, remaining: Callable[[], float], channel: str = "shell") -> None:
        """Ask kernel_info until answered with iopub idle (proves every channel is connected).

        Short attempts: an idle published before our iopub subscription took effect is lost, and
        the wait for it only ends at the attempt's timeout, so a 1 s attempt made starts land at
        ~0.55 s or ~1.05 s by chance. Unanswered requests queue harmlessly in the kernel.
        """
        channels = self._conn.channels
        assert channels is not None
        while True:
            left = remaining()
            if channels.call(channel, "kernel_info_request", {}, min(left, READY_POLL_SECONDS), want_idle=True):
                return

    def evaluate(self, expression: str, timeout: float) -> tuple[Any, str | None]:
        """(decoded value of ``expression``, which yields JSON; the kernel's session id) at start-up.

        Nudged like a tool's query: a joined kernel may idle in Qt's loop.

        Raises:
            StartFailed: the kernel did not answer within ``timeout``.
        """
        channels = self._conn.channels
        assert channels is not None
        content = _silent("")
        content["user_expressions"] = {"e": expression}
        reply = channels.call("shell", "execute_request", content, timeout, nudge_after=NUDGE_AFTER)
        if reply is None:
            raise StartFailed(
                f"the kernel did not answer within {timeout:.0f} s.",
                kind=KernelProblem.NO_ANSWER_AT_START,
                seconds=timeout,
            )
        session = reply.get("header", {}).get("session")
        expr = reply["content"].get("user_expressions", {}).get("e", {})
        try:
            return rendering.parse_expression_json(expr["data"]["text/plain"]), session
        except (ValueError, KeyError, SyntaxError):
            return None, session

    def fetch_bootstrap(self, remaining: Callable[[], float]) -> dict[str, Any] | None:
        """The bootstrap's record from the kernel namespace; None when the bootstrap never ran."""
        channels = self._conn.channels
        assert channels is not None
        content = _silent("")
        content["user_expressions"] = {"b": _BOOTSTRAP_EXPR}
        reply = channels.call("shell", "execute_request", content, remaining())
        if reply is None:
            remaining()
            raise StartFailed("the kernel stopped answering during start-up.")
        expr = reply["content"].get("user_expressions", {}).get("b", {})
        if expr.get("status") != "ok":
            return None
        try:
            result = rendering.parse_expression_json(expr["data"]["text/plain"])
        except (ValueError, KeyError, SyntaxError):
            return {"errors": ["bootstrap record unreadable"]}
        return result if isinstance(result, dict) else None

    def run_silent(self, source: str, timeout: float) -> None:
        """Run ``source`` without recording or output (the bootstrap when exec_files missed it)."""
        channels = self._conn.channels
        assert channels is not None
        channels.call("shell", "execute_request", _silent(source), timeout)

    # -- questions (tools) -------------------------------------------------------------------------
    def inspect(self, path: str) -> dict[str, Any]:
        """Describe ``path`` (a dotted name like ``img`` or ``np.ndarray.shape``) from the kernel.

        Returns type and bounded repr; for a data object (array, table, image, a list or dict
        of them) its shape, dtype and value range instead of its class's docstring; for a
        function, class or module its signature and docstring. The lookup runs in the kernel
        without adding names to the user's namespace (see ``inspection.py``).

        Raises:
            KernelNotReady: no connected kernel.
            KernelBusy: code is running (inspection would wait behind it).
            KernelError: ``path`` is not a dotted name, is not defined, or the kernel did not answer.
        """
        path = path.strip()
        if not _PATH_RE.fullmatch(path):
            raise KernelError(f"{path!r} is not a dotted Python name such as 'img' or 'np.ndarray'.")
        timeout = self._conn.settings.kernel.request_timeout
        expr = self._evaluate_idle(inspection.inspect_expression(path), timeout, "the inspection")
        if expr.get("status") != "ok":
            raise KernelError(f"Inspecting {path!r} failed: {expr.get('ename')}: {expr.get('evalue')}")
        info = rendering.parse_expression_json(expr["data"]["text/plain"])
        if "error" in info:
            raise KernelError(f"Cannot inspect {path!r}: {info['error']}.")
        return dict(info)

    def query(self, expression: str, timeout: float | None = None, what: str = "the query") -> Any:
        """The decoded value of ``expression`` (which yields a JSON string), for a tool's answer.

        Unlike ``query_when_idle`` it says why there is no answer. ``timeout`` defaults to
        ``kernel.request_timeout``; ``what`` names the query in errors ("the viewer query").

        Raises:
            KernelNotReady: no connected kernel.
            KernelBusy: code is running (the query would wait behind it).
            KernelError: the kernel did not answer within ``timeout``, or the expression raised.
        """
        if timeout is None:
            timeout = self._conn.settings.kernel.request_timeout
        expr = self._evaluate_idle(expression, timeout, what)
        if expr.get("status") != "ok":
            raise KernelError(
                f"{what[:1].upper()}{what[1:]} failed in the kernel: {expr.get('ename')}: {expr.get('evalue')}"
            )
        try:
            return rendering.parse_expression_json(expr["data"]["text/plain"])
        except (ValueError, KeyError, SyntaxError) as exc:
            raise KernelError(f"The kernel's answer to {what} was unreadable ({type(exc).__name__}).") from None

    def _evaluate_idle(self, expression: str, timeout: float, what: str) -> dict[str, Any]:
        """The ``user_expressions`` entry of ``expression`` from an idle kernel (one at a time).

        Raises:
            KernelNotReady: no connected kernel.
            KernelBusy: code is running.
            KernelError: another query holds the kernel past ``timeout``, or no answer in time.
        """
        if not self._conn.turn.acquire(timeout=timeout):
            raise KernelError("Another inspection did not finish", kind=KernelProblem.INSPECTION_STUCK)
        try:
            with self._conn.lock:
                channels = self._conn.require()
                current = self._jobs.current
                if current is not None:
                    raise busy(current)
            content = _silent("")
            content["user_expressions"] = {"r": expression}
            reply = channels.call("shell", "execute_request", content, timeout, nudge_after=NUDGE_AFTER)
        finally:
            self._conn.turn.release()
        if reply is None:
            self._conn.require()
            raise KernelError(f"The kernel did not answer {what} within {timeout} s.")
        expr = reply["content"].get("user_expressions", {}).get("r", {})
        return expr if isinstance(expr, dict) else {}

    def query_when_idle(self, expression: str, timeout: float = 2.0) -> Any:
        """The decoded value of ``expression`` (which yields a JSON string) in an idle kernel.

        None at once when no kernel is connected, code runs or an inspection is in flight (a
        status must never wait behind user code), and None on any failure.
        """
        if not self._conn.turn.acquire(blocking=False):
            return None
        try:
            with self._conn.lock:
                channels = self._conn.channels
                if not self._conn.open or channels is None or self._jobs.current is not None:
                    return None
            content = _silent("")
            content["user_expressions"] = {"q": expression}
            reply = channels.call("shell", "execute_request", content, timeout)
        finally:
            self._conn.turn.release()
        if reply is None:
            return None
        expr = reply["content"].get("user_expressions", {}).get("q", {})
        if expr.get("status") != "ok":
            return None
        try:
            return rendering.parse_expression_json(expr["data"]["text/plain"])
        except (ValueError, KeyError, SyntaxError):
            return None


def _silent(code: str) -> dict[str, Any]:
    return {
        "code": code,
        "silent": True,
        "store_history": False,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": False,
    }
