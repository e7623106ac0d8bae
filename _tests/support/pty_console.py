"""A program in a real pseudo-terminal: what it prints is collected, keys are typed into it, and a
terminal emulator (pyte) keeps the screen a person at that terminal would see."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pyte

from _tests.support import terminal_picture

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>]")


class _Terminal(pyte.Screen):
    """pyte's screen, whose answers to the program's queries (the cursor's position) go back to it."""

    def __init__(self, columns: int, lines: int, master: int) -> None:
        super().__init__(columns, lines)
        self._master = master

    def write_process_input(self, data: str) -> None:
        os.write(self._master, data.encode())


class PtyProgram:
    """``argv`` with a pty as its controlling terminal (stdin, stdout and stderr), as big as the
    ``LINES`` and ``COLUMNS`` of ``env`` say (24 × 80 without them)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self._master, slave = os.openpty()
        os.set_blocking(self._master, True)
        lines, columns = int(env.get("LINES", 24)), int(env.get("COLUMNS", 80))
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        self._terminal = _Terminal(columns, lines, self._master)
        self._stream = pyte.ByteStream(self._terminal)
        self.proc = subprocess.Popen(
            list(argv),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self._raw = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self._master, 65536)
            except OSError:  # EIO: the program closed the terminal
                return
            if not chunk:
                return
            with self._lock:
                self._raw.extend(chunk)
                self._stream.feed(chunk)  # answers cursor-position requests, as a real terminal does

    @property
    def screen(self) -> str:
        """Everything printed so far, without terminal escape sequences."""
        with self._lock:
            text = self._raw.decode("utf-8", "replace")
        return _ANSI.sub("", text).replace("\r", "")

    @property
    def cursor_line(self) -> str:
        """The line the cursor is on, up to the cursor."""
        with self._lock:
            return self._terminal.display[self._terminal.cursor.y][: self._terminal.cursor.x]

    def picture(self, path: Path) -> tuple[list[str], int]:
        """The terminal's lines as a person sees them now (what was overwritten is gone), and that
        screen drawn into a PNG at ``path`` at the same moment, with how many rows it drew."""
        with self._lock:
            rows, _ = terminal_picture.draw(self._terminal, path)
            return [line.rstrip() for line in self._terminal.display], rows

    def type(self, text: str) -> None:
        os.write(self._master, text.encode())

    def wait_for(self, pattern: str, timeout: float = 60.0, *, after: int = 0) -> int:
        """Wait until ``pattern`` (a regex) appears in the screen after position ``after``; its end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.screen[after:])
            if m:
                return after + m.end()
            if self.proc.poll() is not None:
                time.sleep(0.2)  # let the reader drain
                m = re.search(pattern, self.screen[after:])
                if m:
                    return after + m.end()
                raise AssertionError(f"program exited ({self.proc.returncode}) before {pattern!r}:\n{self.screen}")
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not shown within {timeout} s:\n{self.screen[-3000:]}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        os.close(self._master)
        self._reader.join(2)
