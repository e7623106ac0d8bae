"""A program in a real pseudo-terminal: what it prints is collected, keys are typed into it."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Sequence

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>]")


class PtyProgram:
    """``argv`` with a pty as its controlling terminal (stdin, stdout and stderr)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self._master, slave = os.openpty()
        os.set_blocking(self._master, True)
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
            if b"\x1b[6n" in chunk:  # answer cursor-position requests like a real terminal
                self.type("\x1b[1;1R")

    @property
    def screen(self) -> str:
        """Everything printed so far, without terminal escape sequences."""
        with self._lock:
            text = self._raw.decode("utf-8", "replace")
        return _ANSI.sub("", text).replace("\r", "")

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
