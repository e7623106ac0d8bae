"""Tool-call trace: one JSON line per tool call, for the bench to read.

The trace says what an agent did without recording what it wrote: doc ids, the length of the
code, the search query, never the code or a doc body; of each answer only its length (what the
call cost the agent's context). Lines are appended under a lock and each
is written with one ``write`` on an ``O_APPEND`` descriptor, so concurrent calls (sync tools run
on worker threads) never interleave inside a line.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["Tracer", "summarize_arguments"]

_TEXT_KEYS_BY_LENGTH = ("code", "body", "old", "new")
"""Arguments whose content is private or bulky: the trace keeps only their length."""

_MAX_SCALAR_CHARS = 200
"""Longest id, path or query kept verbatim in a trace line."""


def summarize_arguments(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Reduce tool arguments to what the trace may keep.

    Code and doc text become ``<name>_chars`` counts; ids, queries, paths and numbers are kept,
    clipped to a few hundred characters.
    """
    summary: dict[str, Any] = {}
    for key, value in (arguments or {}).items():
        if key in _TEXT_KEYS_BY_LENGTH:
            if value is not None:
                summary[f"{key}_chars"] = len(value) if isinstance(value, str) else None
        elif isinstance(value, str):
            summary[key] = value[:_MAX_SCALAR_CHARS]
        elif isinstance(value, (int, float, bool)) or value is None:
            summary[key] = value
        else:
            summary[key] = type(value).__name__
    return summary


class Tracer:
    """Appends tool-call records to a JSON-lines file; safe to call from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def record(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None,
        *,
        duration_ms: float,
        ok: bool,
        error: str | None = None,
        answer_chars: int | None = None,
    ) -> None:
        """Append one line; a trace that cannot be written is logged, never fatal to the call."""
        entry: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "tool": tool,
            "args": summarize_arguments(arguments),
            "duration_ms": round(duration_ms, 3),
            "ok": ok,
        }
        if error is not None:
            entry["error"] = error[:_MAX_SCALAR_CHARS]
        if answer_chars is not None:
            entry["answer_chars"] = answer_chars
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, line)
                finally:
                    os.close(fd)
            except OSError:
                logger.exception("Could not append to trace file %s", self.path)

    @staticmethod
    def clock() -> float:
        """Monotonic seconds, the clock durations are measured on."""
        return time.perf_counter()
