"""The server log: size-capped rotation whose every file stays private (0600)."""

from __future__ import annotations

import logging
import stat

import pytest

from biopb_mcp.config.settings import load_settings
from biopb_mcp.server import logs
from biopb_mcp.server.logs import setup_logging


def test_the_log_rotates_at_its_size_cap_and_every_file_stays_0600(
    root_handlers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "LOG_MAX_BYTES", 20_000)
    settings = load_settings()
    setup_logging(settings, stderr=False)
    flood = logging.getLogger("biopb_mcp.test_flood")
    for n in range(2000):  # ~300 KB of records
        flood.warning("record %d %s", n, "y" * 100)
    files = sorted(settings.log_file.parent.glob("server.log*"))
    assert [f.name for f in files] == ["server.log", "server.log.1", "server.log.2"]
    assert sum(f.stat().st_size for f in files) <= 3 * 20_000
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files), [oct(f.stat().st_mode) for f in files]
    assert "record 1999" in settings.log_file.read_text(encoding="utf-8")
