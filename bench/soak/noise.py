"""Pipelined calls with kernel noise: a thousand tool calls in flight while the kernel prints.

A plugin prints at load; then a thread in the kernel prints to stdout and stderr and writes to
fds 1 and 2 every few milliseconds while the calls flow. Every line on the server's stdout must
be one JSON-RPC message, every call answered, every execution's answer its own; at the end stdin
EOF shuts the kernel down and the server exits 0. The last check is for orphans: a kernel still
alive 5 s after its server ended, by EOF or by SIGKILL.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections import Counter
from pathlib import Path

import psutil

from _tests.support.raw_server import RawServer, WireError, result_text

__all__ = ["NOISE_OFF", "NOISE_ON", "NOISY_PLUGIN", "kill_with_kernel", "pipeline_with_noise"]

NOISY_PLUGIN = "import os\nprint('plugin print at load')\nos.write(1, b'plugin fd write at load\\n')\n"

NOISE_ON = """\
import os, sys, threading, time
_soak_quiet = threading.Event()
def _soak_noise():
    n = 0
    while not _soak_quiet.is_set():
        n += 1
        print(f"noise {n}", flush=True)
        sys.stderr.write(f"noise err {n}\\n")
        os.write(1, b"noise on fd 1\\n")
        os.write(2, b"noise on fd 2\\n")
        time.sleep(0.005)
threading.Thread(target=_soak_noise, daemon=True).start()
"""
NOISE_OFF = "_soak_quiet.set()"

CALLS = [
    ("server_status", {}),
    ("read_doc", {"id": "index"}),
    ("execute_code", {"code": "import sys\nprint('o' * 200)\nsys.stderr.write('e' * 50)\n7 * 6"}),
    ("read_doc", {"id": "no-such-doc"}),
]


def _kernel_pid(server: RawServer) -> int:
    pid = json.loads(result_text(server.call("server_status")))["kernel"]["pid"]
    if not isinstance(pid, int):
        raise TypeError(f"no kernel pid in server_status: {pid!r}")
    return pid


def gone_within(pid: int, seconds: float) -> bool:
    """The process exits (or is a zombie) within ``seconds``."""
    try:
        proc = psutil.Process(pid)
        proc.wait(timeout=seconds)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return proc.status() == psutil.STATUS_ZOMBIE
    return True


def _started(env: dict[str, str], stderr: Path) -> tuple[RawServer, int]:
    server = RawServer(env, stderr)
    server.initialize()
    started = server.call("start_kernel", timeout=120)
    if started.get("isError"):
        server.close()
        raise RuntimeError(f"start_kernel failed: {result_text(started)[:300]}")
    return server, _kernel_pid(server)


def _call(server: RawServer, counts: Counter[str], name: str, args: dict[str, str]) -> dict:
    """One tool call that counts stray lines on the wire instead of failing on them."""
    rid = server.request("tools/call", {"name": name, "arguments": args})
    while True:
        try:
            message = server.read_message(timeout=120)
        except WireError:
            counts["wire: stray lines on stdout"] += 1
            continue
        if message.get("id") == rid:
            result: dict = message.get("result", {})
            return result


def pipeline_with_noise(env: dict[str, str], stderr: Path, calls: int, in_flight: int = 100) -> Counter[str]:
    """``calls`` pipelined tool calls (``in_flight`` at a time) against a noisy kernel; the counts."""
    counts: Counter[str] = Counter()
    server, kernel_pid = _started(env, stderr)
    try:
        noisy = _call(server, counts, "execute_code", {"code": NOISE_ON})
        if noisy.get("isError"):
            raise RuntimeError(f"the noise thread did not start: {result_text(noisy)[:300]}")
        sent: dict[int, str] = {}
        answers: dict[int, dict] = {}
        while len(sent) < calls:
            batch = min(in_flight, calls - len(sent))
            for _ in range(batch):
                name, args = CALLS[len(sent) % len(CALLS)]
                sent[server.request("tools/call", {"name": name, "arguments": args})] = name
            while len(answers) < len(sent):
                try:
                    message = server.read_message(timeout=120)
                except WireError:
                    counts["wire: stray lines on stdout"] += 1
                    continue
                except (TimeoutError, EOFError):
                    break
                if "id" in message:
                    answers[message["id"]] = message
        counts["pipelined calls sent"] += len(sent)
        counts["pipelined calls unanswered"] += len(set(sent) - set(answers))
        for rid, name in sent.items():
            if rid not in answers:
                continue
            if "error" in answers[rid]:
                counts["pipelined calls answered with a protocol error"] += 1
                continue
            text = result_text(answers[rid]["result"])
            if name == "execute_code":
                if "o" * 200 in text and "42" in text:
                    counts["executions answered (42)"] += 1
                elif "busy" in text.lower():
                    counts["executions refused as busy"] += 1
                else:
                    counts["executions with a wrong answer"] += 1
        _call(server, counts, "execute_code", {"code": NOISE_OFF})
        final = _call(server, counts, "execute_code", {"code": "print('still fine')"})
        if "still fine" not in result_text(final):
            counts["executions with a wrong answer"] += 1
        assert server.proc.stdin is not None
        server.proc.stdin.close()  # EOF: the server shuts the kernel down and leaves
        try:
            code: int | None = server.proc.wait(30)
        except subprocess.TimeoutExpired:  # a hang is a finding, counted below
            code = None
        counts["servers not exiting 0 on stdin EOF"] += code != 0
        counts["orphan kernels"] += not gone_within(kernel_pid, 5.0)
    finally:
        server.close()
    return counts


def kill_with_kernel(env: dict[str, str], stderr: Path) -> Counter[str]:
    """SIGKILL a server that holds a live kernel: the kernel must be gone within 5 s."""
    counts: Counter[str] = Counter()
    server, kernel_pid = _started(env, stderr)
    try:
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        counts["servers SIGKILLed with a live kernel"] += 1
        orphaned = not gone_within(kernel_pid, 5.0)
        counts["orphan kernels"] += orphaned
        if orphaned:
            psutil.Process(kernel_pid).kill()  # ours: counted, then cleaned up
    finally:
        server.close()
    return counts
