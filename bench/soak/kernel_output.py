"""What a server holds and answers for big kernel output, at the hardening review's counts.

``output-memory``: a real server over stdio runs ``big_prints`` cells that each print
``print_mb`` MB with an emoji on every line (Python then stores the text at 4 bytes a
character), then one exception with a ``error_mb`` MB message; a sampler follows the server's
RSS throughout. The review saw 1,091 MB held after 8 prints of 70 MB, and +251 MB left by a
50 MB exception message: what finished executions keep is now bounded by
``kernel.max_kept_bytes`` (default 128 MiB), the rest saved to a file the answer names.

``viewer-names``: a napari viewer (on a private Xvfb display) with a layer named by
``layer_name_chars`` characters; the review saw a 2,000,879-byte answer with no screenshot. The
answer must fit ``kernel.max_result_bytes`` with the screenshot attached.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from _tests.support import raw_server as servers

__all__ = ["PHASES", "output_memory", "run_phase", "viewer_names"]

PHASES = ("output-memory", "viewer-names")

MIB = 1024 * 1024

HELD_SLACK_MB = 128
"""MB a server's RSS may stay above what it keeps: the allocator holds on to some of the memory
big messages passed through (RSS is what the machine sees, not what Python still uses)."""

RESULT_LIMIT = 1_000_000
"""``kernel.max_result_bytes`` at its default."""

KEPT_LIMIT_MB = 128
"""``kernel.max_kept_bytes`` at its default, in MiB."""

FOUND = {
    "output memory: server held past its bound after big output": (
        "finished executions holding more than kernel.max_kept_bytes (plus allocator slack)"
    ),
    "output memory: answers past max_result_bytes": "an execute_code answer a client would drop whole",
    "viewer names: answer past max_result_bytes or without its screenshot": (
        "a long layer name pushed the screenshot out, or the text past the limit"
    ),
}
"""What these phases look for, each a count that must be 0."""


class Scale(Protocol):
    @property
    def big_prints(self) -> int: ...
    @property
    def print_mb(self) -> int: ...
    @property
    def error_mb(self) -> int: ...
    @property
    def layer_name_chars(self) -> int: ...


class Out(Protocol):
    counts: Counter[str]

    def found(self, kind: str, what: str) -> None: ...


class _Peak:
    """Samples one process's RSS every 50 ms on a thread; ``peak`` is the highest seen."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._proc = psutil.Process(pid)
        self.peak = self.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> int:
        return int(self._proc.memory_info().rss)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(Exception):
                self.peak = max(self.peak, self.now())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _answer_bytes(result: dict[str, Any]) -> int:
    return len(json.dumps(result, separators=(",", ":")).encode())


def _server(root: Path, name: str, extra: str, env_extra: dict[str, str] | None = None) -> servers.RawServer:
    env = servers.write_config(root / name, extra, log_level="ERROR")
    server = servers.RawServer({**env, **(env_extra or {})}, root / f"{name}.stderr")
    server.initialize()
    started = server.call("start_kernel", timeout=180)
    if started.get("isError"):
        server.close()
        raise RuntimeError(f"{name}: start_kernel failed: {servers.result_text(started)[:500]}")
    return server


def output_memory(root: Path, scale: Scale, out: Out) -> None:
    """Big prints and a big exception message through a real server; its RSS followed throughout."""
    server = _server(root, "output-memory", "[kernel]\npromote_after = 3600.0\n")
    try:
        peak = _Peak(server.proc.pid)
        baseline = peak.now()
        lines = scale.print_mb * 1_000_000 // 71  # 69 ASCII characters, an emoji, a newline
        code = f"import sys\nline = 'x' * 69 + '\\U0001f642\\n'\nfor _ in range({lines}):\n    sys.stdout.write(line)"
        largest = 0
        for _ in range(scale.big_prints):
            result = server.call("execute_code", {"code": code}, timeout=1800)
            largest = max(largest, _answer_bytes(result))
            out.counts["output memory: big prints run"] += 1
        after_prints = peak.now()
        error = f"raise ValueError('e' * {scale.error_mb * 1_000_000})"
        result = server.call("execute_code", {"code": error}, timeout=1800)
        largest = max(largest, _answer_bytes(result))
        after_error = peak.now()
        peak.stop()
    finally:
        server.close()
    out.counts["output memory: server RSS at start (MB)"] = baseline // MIB
    out.counts["output memory: server RSS peak (MB)"] = peak.peak // MIB
    out.counts["output memory: server RSS after the prints (MB)"] = after_prints // MIB
    out.counts["output memory: server RSS after the big exception (MB)"] = after_error // MIB
    out.counts["output memory: largest answer (bytes)"] = largest
    held = (after_prints - baseline) // MIB
    if held > KEPT_LIMIT_MB + HELD_SLACK_MB:
        out.found(
            "output memory: server held past its bound after big output",
            f"{held} MB above the start after the prints, bound {KEPT_LIMIT_MB} MB",
        )
    added = (after_error - after_prints) // MIB
    if added > KEPT_LIMIT_MB // 4 + HELD_SLACK_MB:
        out.found(
            "output memory: server held past its bound after big output",
            f"{added} MB more after the exception, bound {KEPT_LIMIT_MB // 4} MB",
        )
    if largest > RESULT_LIMIT:
        out.found("output memory: answers past max_result_bytes", f"{largest} bytes")


@contextlib.contextmanager
def _display() -> Iterator[str | None]:
    """A private Xvfb display (None when Xvfb is not installed)."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        yield None
        return
    read, write = os.pipe()
    proc = subprocess.Popen(
        [xvfb, "-displayfd", str(write), "-screen", "0", "1280x1024x24", "-nolisten", "tcp"], pass_fds=(write,)
    )
    os.close(write)
    try:
        number = b""
        while not number.endswith(b"\n"):
            chunk = os.read(read, 16)
            if not chunk:
                break
            number += chunk
        yield f":{number.decode().strip()}"
    finally:
        os.close(read)
        proc.terminate()
        proc.wait(10)


def viewer_names(root: Path, scale: Scale, out: Out) -> None:
    """A layer named by ``layer_name_chars`` characters: the answer's size and its screenshot."""
    import importlib.util

    if importlib.util.find_spec("napari") is None:
        out.counts["viewer names: skipped (napari not installed)"] += 1
        return
    with _display() as display:
        if display is None:
            out.counts["viewer names: skipped (no Xvfb)"] += 1
            return
        env = {"DISPLAY": display, "QT_QPA_PLATFORM": "xcb"}
        server = _server(root, "viewer-names", "[kernel]\npromote_after = 600.0\nrequest_timeout = 120.0\n", env)
        try:
            made = server.call(
                "execute_code",
                {
                    "code": (
                        "import numpy as np\nv = viewer()\n"
                        f"v.add_image(np.random.default_rng(0).random((256, 256)), name='n' * {scale.layer_name_chars})"
                    )
                },
                timeout=600,
            )
            if made.get("isError"):
                raise RuntimeError(f"viewer-names: the layer was not added: {servers.result_text(made)[:500]}")
            look = server.call("look_at_viewer", timeout=300)
        finally:
            server.close()
    size = _answer_bytes(look)
    images = sum(1 for block in look.get("content", []) if block.get("type") == "image")
    out.counts["viewer names: layer name characters"] = scale.layer_name_chars
    out.counts["viewer names: answer (bytes)"] = size
    out.counts["viewer names: answer text (characters)"] = len(servers.result_text(look))
    out.counts["viewer names: screenshots attached"] = images
    if size > RESULT_LIMIT or images != 1:
        out.found(
            "viewer names: answer past max_result_bytes or without its screenshot",
            f"{size} bytes, {images} image(s)",
        )


def run_phase(phase: str, root: Path, scale: Scale, out: Out) -> None:
    """Run one of :data:`PHASES`."""
    {"output-memory": output_memory, "viewer-names": viewer_names}[phase](root, scale, out)
