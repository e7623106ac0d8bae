"""Kernel-test helpers (imported by the kernel tests as ``from kernel_helpers import ...``)."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import zlib

from _tests.support.processes import gone


def png_bytes(width: int = 4, height: int = 3) -> bytes:
    """A valid greyscale PNG built with zlib + struct (no Pillow needed)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes((x * 40) % 256 for x in range(width)) for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def stop_process(proc: subprocess.Popen[str], *leftover_pids: int | None) -> None:
    """Test cleanup: kill a spawned host and its pipes, and any process it left behind."""
    proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()
    for pid in leftover_pids:
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)
